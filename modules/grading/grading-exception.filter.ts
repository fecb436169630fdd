import { type ArgumentsHost, Catch, type ExceptionFilter, HttpException, Logger } from '@nestjs/common';

interface JsonResponse {
  status(code: number): { json(body: unknown): void };
}

/**
 * Every grading API error answers `{statusCode, error: "<what went wrong>", …}`: agents written for
 * the paper's server print `error`. Validation messages are joined into that one string.
 */
@Catch()
export class GradingExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('GradingAPI');

  catch(exception: unknown, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<JsonResponse>();
    if (!(exception instanceof HttpException)) {
      this.logger.error(exception instanceof Error ? (exception.stack ?? exception.message) : String(exception));
      res.status(500).json({ statusCode: 500, error: `internal error of the grading API: ${exception instanceof Error ? exception.message : String(exception)}` });
      return;
    }
    const status = exception.getStatus();
    const raw = exception.getResponse();
    if (typeof raw === 'string') {
      res.status(status).json({ statusCode: status, error: raw });
      return;
    }
    const { message, error, ...rest } = raw as { message?: unknown; error?: unknown };
    const text = Array.isArray(message) ? message.join('; ') : typeof message === 'string' ? message : typeof error === 'string' ? error : exception.message;
    res.status(status).json({ ...rest, statusCode: status, error: text });
  }
}
