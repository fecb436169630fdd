import type { IncomingHttpHeaders } from 'node:http';

/** The credential of an `Authorization: Bearer <token>` header (API tokens and run tokens alike), or null. */
export function bearerToken(headers: IncomingHttpHeaders): string | null {
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(headers.authorization ?? '');
  return match ? match[1] : null;
}
