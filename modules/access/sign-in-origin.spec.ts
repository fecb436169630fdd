import { describe, expect, it } from '@jest/globals';
import { crossOriginRefusal, isJsonBody } from './sign-in-origin.js';

describe('crossOriginRefusal', () => {
  const host = '127.0.0.1:8080';

  it('passes the server\'s own pages and clients that are not browsers', () => {
    expect(crossOriginRefusal({ host, 'sec-fetch-site': 'same-origin', origin: 'http://127.0.0.1:8080' })).toBeNull();
    expect(crossOriginRefusal({ host, 'sec-fetch-site': 'none' })).toBeNull();
    expect(crossOriginRefusal({ host, origin: 'http://127.0.0.1:8080' })).toBeNull(); // an older browser: Origin only
    expect(crossOriginRefusal({ host: 'a2rl.example.org', origin: 'https://a2rl.example.org' })).toBeNull();
    expect(crossOriginRefusal({ host: 'A2RL.example.org:443', origin: 'https://a2rl.example.org' })).toBeNull(); // default port, case
    expect(crossOriginRefusal({ host: '127.0.0.1:8080', 'x-forwarded-host': 'a2rl.example.org', origin: 'https://a2rl.example.org' })).toBeNull(); // behind a proxy
    expect(crossOriginRefusal({ host })).toBeNull(); // curl, scripts
  });

  it('refuses another site, another port of this host, and opaque origins', () => {
    expect(crossOriginRefusal({ host, 'sec-fetch-site': 'cross-site', origin: 'https://evil.example' })).toMatch(/Sec-Fetch-Site is cross-site/);
    expect(crossOriginRefusal({ host, 'sec-fetch-site': 'same-site', origin: 'http://127.0.0.1:9999' })).toMatch(/Sec-Fetch-Site is same-site/);
    expect(crossOriginRefusal({ host, origin: 'https://evil.example' })).toMatch(/Origin https:\/\/evil\.example is not this server/);
    expect(crossOriginRefusal({ host, origin: 'http://127.0.0.1:9999' })).toMatch(/is not this server/);
    expect(crossOriginRefusal({ host, origin: 'null' })).toMatch(/not a web origin/);
    expect(crossOriginRefusal({ origin: 'http://127.0.0.1:8080' })).toMatch(/is not this server/); // no Host to match
  });
});

describe('isJsonBody', () => {
  it('takes application/json only, parameters allowed', () => {
    expect(isJsonBody({ 'content-type': 'application/json' })).toBe(true);
    expect(isJsonBody({ 'content-type': 'Application/JSON; charset=utf-8' })).toBe(true);
    for (const type of ['application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'text/plain', 'text/plain; a=application/json', undefined]) {
      expect(isJsonBody({ 'content-type': type })).toBe(false);
    }
  });
});
