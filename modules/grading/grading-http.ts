import type { NestExpressApplication } from '@nestjs/platform-express';
import { bridgedRunPrefix } from './grading-sockets.js';
import { GRADING_BODY_LIMIT_BYTES } from './grading.options.js';

interface BodyParserError {
  status?: unknown;
  type?: unknown;
  message?: unknown;
}

interface JsonResponse {
  status(code: number): { json(body: unknown): void };
}

/**
 * HTTP settings the grading API needs; call on the app before `init()`/`listen()`. Bodies are capped
 * at 64 KiB (these replace Nest's default parsers), requests from a run's socket are routed to that
 * run only (grading-sockets.ts), and body-parser failures, which happen before
 * Nest's routing and filters, answer JSON 4xx instead of Express's HTML page.
 */
export function configureGradingHttp(app: NestExpressApplication): void {
  app.use(bridgedRunPrefix);
  app.useBodyParser('json', { limit: GRADING_BODY_LIMIT_BYTES });
  app.useBodyParser('urlencoded', { limit: GRADING_BODY_LIMIT_BYTES, extended: false });
  app.use(bodyParserErrors);
}

function bodyParserErrors(err: BodyParserError, _req: unknown, res: JsonResponse, next: (err?: unknown) => void): void {
  const status = typeof err?.status === 'number' ? err.status : 0;
  if (typeof err?.type !== 'string' || status < 400 || status >= 500) {
    next(err);
    return;
  }
  const error =
    err.type === 'entity.too.large'
      ? `request body too large: the grading API accepts at most ${GRADING_BODY_LIMIT_BYTES / 1024} KiB`
      : err.type === 'entity.parse.failed'
        ? `request body is not valid JSON: ${String(err.message)}`
        : `request body refused: ${String(err.message)}`;
  res.status(status).json({ statusCode: status, error });
}
