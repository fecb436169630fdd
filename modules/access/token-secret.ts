import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** Every API token starts so (easy to spot in a leaked file, and for secret scanners). */
export const TOKEN_PREFIX = 'a2rl_';
/** `a2rl_` + base64url of 32 random bytes (43 characters). */
const TOKEN = /^a2rl_([A-Za-z0-9_-]{43})$/;
/** The first characters of the random part name the token (its id, in lists and the ledger). */
const ID_LENGTH = 8;

export interface NewSecret {
  secret: string;
  tokenId: string;
  sha256: string;
}

/**
 * A fresh token. Its id is the first 8 characters of the random part: a selector that finds the
 * token without a lookup by secret, then compared by hash in constant time (48 of 256 bits are
 * thus public; the other 208 are the secret). Ids that start with `-` or `_` are drawn again so
 * that `a2rl tokens revoke <id>` never reads as an option.
 */
export function newSecret(taken: (tokenId: string) => boolean = () => false): NewSecret {
  for (;;) {
    const secret = `${TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
    const tokenId = tokenIdOf(secret)!;
    if (/^[A-Za-z0-9]/.test(tokenId) && !taken(tokenId)) return { secret, tokenId, sha256: secretHash(secret) };
  }
}

/** The id a presented secret claims, or null when it is not shaped like an a2rl token. */
export function tokenIdOf(secret: string): string | null {
  const match = TOKEN.exec(secret);
  return match ? match[1].slice(0, ID_LENGTH) : null;
}

export function secretHash(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

/** Whether `secret` hashes to `storedSha256`, compared in constant time. */
export function secretMatches(secret: string, storedSha256: string): boolean {
  const presented = Buffer.from(secretHash(secret), 'hex');
  const stored = Buffer.from(storedSha256, 'hex');
  return stored.length === presented.length && timingSafeEqual(presented, stored);
}

const DAY_MS = 86_400_000;
const EXPIRY_UNITS_MS: Record<string, number> = { h: 3_600_000, d: DAY_MS, w: 7 * DAY_MS };

/**
 * `--expires`: a duration from now (`12h`, `30d`, `8w`) or an ISO 8601 time; absent: never.
 * Returns the ISO time, or throws one line. At most 10 years ahead; never in the past.
 */
export function parseExpiry(text: string | undefined, now: Date): string | null {
  if (text === undefined) return null;
  const value = text.trim();
  const relative = /^(\d{1,5})([hdw])$/.exec(value);
  const at = relative ? now.getTime() + Number(relative[1]) * EXPIRY_UNITS_MS[relative[2]] : /^\d{4}-\d{2}-\d{2}/.test(value) ? Date.parse(value) : NaN;
  if (!Number.isFinite(at)) throw new Error(`--expires: expected a duration such as 12h, 30d or 8w, or an ISO 8601 time, got "${text}"`);
  if (at <= now.getTime()) throw new Error(`--expires: ${value} is not in the future`);
  if (at > now.getTime() + 3653 * DAY_MS) throw new Error(`--expires: ${value} is more than 10 years ahead`);
  return new Date(at).toISOString();
}
