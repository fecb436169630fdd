import { Body, Controller, Get, HttpCode, Post, Query, Req, Res, UnauthorizedException, UseGuards } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import type { A2rlEvent } from '../ledger/events/catalog.js';
import { AccessControl, SESSION_COOKIE, sourceOf, type AccessRequest, type Identity } from './access-control.js';
import { Public, Role } from './access.decorators.js';
import { AccessQuery, LoginBody } from './access.dto.js';
import { withoutHash } from './access-state.js';
import { SameOriginSignIn } from './sign-in-origin.js';

/** What these routes use of Express's request and response. */
type Request = AccessRequest & { secure: boolean };
interface CookieOptions {
  httpOnly: boolean;
  sameSite: 'strict';
  secure: boolean;
  path: string;
  maxAge?: number;
}
interface Response {
  cookie(name: string, value: string, options: CookieOptions): void;
  clearCookie(name: string, options: CookieOptions): void;
}

/** `/auth/*` (reachable without a credential) and the access stream for operators. */
@ApiTags('access')
@Controller()
export class AccessController {
  constructor(private readonly access: AccessControl) {}

  /**
   * Signs the browser in with a token: an HttpOnly, SameSite=Strict session cookie holding it (revoking
   * the token ends the session). JSON only, never from another site's page (sign-in-origin.ts).
   */
  @Post('auth/login')
  @Public()
  @UseGuards(SameOriginSignIn)
  @HttpCode(204)
  async login(@Body() body: LoginBody, @Req() req: Request, @Res({ passthrough: true }) res: Response): Promise<void> {
    const found = await this.access.tokenIdentity(body.token);
    if (!('identity' in found)) {
      await this.access.refused(req, 'actor' in found ? found.actor : null, 'sign-in', null, 'refused' in found ? found.refused : 'no token');
      throw new UnauthorizedException(`sign-in refused: ${'refused' in found ? found.refused : 'no token'}`);
    }
    await this.access.recorded(found.identity, 'sign-in', null, { detail: `from ${sourceOf(req)}` });
    const token = (await this.access.ledger.read()).tokens.get(found.identity.id)!;
    const maxAge = token.expiresAt === null ? undefined : Math.max(0, Date.parse(token.expiresAt) - Date.now());
    res.cookie(SESSION_COOKIE, body.token, { httpOnly: true, sameSite: 'strict', secure: req.secure, path: '/', ...(maxAge === undefined ? {} : { maxAge }) });
  }

  @Post('auth/logout')
  @Public()
  @UseGuards(SameOriginSignIn)
  @HttpCode(204)
  logout(@Req() req: Request, @Res({ passthrough: true }) res: Response): void {
    res.clearCookie(SESSION_COOKIE, { httpOnly: true, sameSite: 'strict', secure: req.secure, path: '/' });
  }

  /** Whether this server requires a credential, and who the request is (null: nobody, where one is required). */
  @Get('auth/me')
  @Public()
  async me(@Req() req: Request): Promise<{ required: boolean; identity: Pick<Identity, 'kind' | 'name' | 'role'> | null }> {
    const found = await this.access.identify(req);
    const identity = 'identity' in found ? found.identity : this.access.required ? null : this.access.anonymous(req);
    return { required: this.access.required, identity: identity && { kind: identity.kind, name: identity.name, role: identity.role } };
  }

  /** The access stream: tokens created and revoked (ids, never secrets) and access records, paged by seq. */
  @Get('access')
  @Role('operator')
  async list(@Query() q: AccessQuery): Promise<{ afterSeq: number; limit: number; items: A2rlEvent[] }> {
    const items: A2rlEvent[] = [];
    let after = q.after_seq;
    // Filtered pages read on until `limit` matches or the stream ends.
    for (;;) {
      const page = await this.access.ledger.events(after, 1000);
      for (const e of page) if (!q.run || (e.type === 'AccessRecorded' && e.data.target?.runId === q.run)) items.push(e);
      if (page.length < 1000 || items.length >= q.limit) break;
      after = page[page.length - 1].seq;
    }
    return { afterSeq: q.after_seq, limit: q.limit, items: items.slice(0, q.limit).map(withoutHash) };
  }
}

