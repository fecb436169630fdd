import canonicalizeLib from 'canonicalize';

// RFC 8785 (JSON Canonicalization Scheme) via `canonicalize`, the reference implementation by
// one of the RFC's authors: sorted keys, ECMAScript number formatting, minimal escaping.
const canonicalizeFn = canonicalizeLib as unknown as (value: unknown) => string | undefined;

export function canonicalJson(value: unknown): string {
  const text = canonicalizeFn(value);
  if (text === undefined) throw new TypeError('value has no JSON representation');
  return text;
}

export function canonicalBytes(value: unknown): Buffer {
  return Buffer.from(canonicalJson(value), 'utf8');
}
