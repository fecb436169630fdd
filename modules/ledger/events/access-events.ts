import 'reflect-metadata';
import { Type } from 'class-transformer';
import {
  IsBoolean,
  IsIn,
  IsObject,
  IsOptional,
  IsString,
  Matches,
  MaxLength,
  MinLength,
  ValidateIf,
  ValidateNested,
} from 'class-validator';
import { SHA256, ISO_UTC } from './shared.js';

// ── The access stream (`access-log`; the envelope's `runId` holds `log`) ──────────────────────────
// Who may look (docs/security.md): API tokens (only their sha256 is kept) and every sign-in, export,
// regrade, cancel and verify, and token use (coalesced), so an auditor can see who read what.

const TOKEN_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
export const ACCESS_ROLES = ['viewer', 'operator'] as const;
export type AccessRole = (typeof ACCESS_ROLES)[number];
export const ACCESS_ACTIONS = ['sign-in', 'token-use', 'export', 'regrade', 'cancel', 'verify', 'query'] as const;
export type AccessAction = (typeof ACCESS_ACTIONS)[number];

export class TokenCreated {
  @Matches(TOKEN_ID) tokenId!: string;
  @IsString() @MinLength(1) @MaxLength(200) name!: string;
  @IsIn(ACCESS_ROLES) role!: AccessRole;
  /** SHA-256 of the whole secret (`a2rl_…`); the secret itself is printed once and never stored. */
  @Matches(SHA256) sha256!: string;
  @ValidateIf((_, v) => v !== null) @Matches(ISO_UTC) expiresAt!: string | null;
}

export class TokenRevoked {
  @Matches(TOKEN_ID) tokenId!: string;
}

/**
 * Who acted: a token (id = token id), a reverse proxy's user (id = user name), the command line on
 * the ledger's host (id = name = the OS user running `a2rl`), or nobody known (id = source address).
 */
export class AccessActor {
  @IsIn(['token', 'proxy', 'cli', 'anonymous']) kind!: 'token' | 'proxy' | 'cli' | 'anonymous';
  @IsString() @MinLength(1) @MaxLength(200) id!: string;
  @IsString() @MinLength(1) @MaxLength(200) name!: string;
  /** Absent for an anonymous caller that was refused. */
  @IsOptional() @IsIn(ACCESS_ROLES) role?: AccessRole;
}

export class AccessTarget {
  @IsOptional() @Matches(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/) runId?: string;
  @IsOptional() @Matches(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/) campaignId?: string;
}

export class AccessRecorded {
  @IsObject() @ValidateNested() @Type(() => AccessActor) actor!: AccessActor;
  @IsIn(ACCESS_ACTIONS) action!: AccessAction;
  @ValidateIf((_, v) => v !== null) @IsObject() @ValidateNested() @Type(() => AccessTarget) target!: AccessTarget | null;
  /** 'ok': allowed (and, for export/cancel/regrade/verify, done); 'refused': 401/403, no data given. */
  @IsIn(['ok', 'refused']) outcome!: 'ok' | 'refused';
  /** For verify: whether the run's chain verified (absent for every other action). */
  @IsOptional() @IsBoolean() verified?: boolean;
  @IsOptional() @IsString() @MaxLength(1000) detail?: string;
}

/** The access stream event types, their payload classes and current schema versions. */
export const ACCESS_EVENTS = {
  TokenCreated: { payload: TokenCreated, version: 1 },
  TokenRevoked: { payload: TokenRevoked, version: 1 },
  AccessRecorded: { payload: AccessRecorded, version: 1 },
} as const;
