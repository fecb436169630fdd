import { existsSync } from 'node:fs';
import path from 'node:path';
import { BadRequestException, Controller, Get, NotFoundException, Param, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import { packageRoot } from '../settings/package-root.js';

/** The part of express's response this controller uses. */
interface FileResponse {
  readonly headersSent: boolean;
  status(code: number): FileResponse;
  type(type: string): FileResponse;
  send(body: string): unknown;
  setHeader(name: string, value: string): unknown;
  sendFile(file: string, options: { root: string; dotfiles: 'deny'; headers?: Record<string, string> }, done: (err?: Error & { status?: number; statusCode?: number }) => void): void;
}

/** Where `npm run build` puts the dashboard (Vite, from modules/dashboard/web). */
export function dashboardDir(): string {
  return path.join(packageRoot(), 'dist', 'dashboard-web');
}

const NOT_BUILT = 'the dashboard is not built: run `npm run build` (it writes dist/dashboard-web/)';
/** Vite's asset names: hashed, so they may be cached for good. */
const ASSET = /^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$/;
const IMMUTABLE = { 'Cache-Control': 'public, max-age=31536000, immutable' };

/**
 * The dashboard's single page: `/` (index.html) and its `/assets/*`. Its routes are hash routes
 * (`/#/runs/<id>`), so nothing else is served here and no API path is shadowed.
 */
@ApiExcludeController()
@Controller()
export class StaticController {
  private readonly root = dashboardDir();

  @Get()
  async index(@Res() res: FileResponse): Promise<void> {
    if (!existsSync(path.join(this.root, 'index.html'))) {
      res.status(503).type('text/plain; charset=utf-8').send(`${NOT_BUILT}\n`);
      return;
    }
    // Always revalidated: it names the current build's hashed assets.
    return this.send(res, 'index.html', { 'Cache-Control': 'no-cache' });
  }

  @Get('favicon.svg')
  favicon(@Res() res: FileResponse): Promise<void> {
    return this.send(res, 'favicon.svg', {});
  }

  @Get('assets/:file')
  asset(@Param('file') file: string, @Res() res: FileResponse): Promise<void> {
    if (!ASSET.test(file)) throw new BadRequestException('not an asset name');
    return this.send(res, `assets/${file}`, IMMUTABLE);
  }

  /** express's sendFile under the build directory (type, length, ETag, ranges); never outside it. */
  private send(res: FileResponse, file: string, headers: Record<string, string>): Promise<void> {
    return new Promise((resolve, reject) => {
      res.sendFile(file, { root: this.root, dotfiles: 'deny', headers }, (err) => {
        if (!err || res.headersSent) return resolve(); // sent, or the client left mid-file
        const status = err.status ?? err.statusCode;
        reject(status === 404 ? new NotFoundException(`no ${file} in the dashboard build`) : err);
      });
    });
  }
}
