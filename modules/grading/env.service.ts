import { BadRequestException, ConflictException, HttpException, HttpStatus, Injectable, InternalServerErrorException, NotFoundException, ServiceUnavailableException } from '@nestjs/common';
import type { InteractiveEnvironment } from '../../tasks/task-pack.js';
import { OpenSession, type ActiveRun } from './run-registry.js';

/** Open (unfinished) sessions one run may hold at once. */
export const MAX_OPEN_SESSIONS = 256;

export interface EnvResetResponse {
  session_id: string;
  observation: string;
  admissible_actions: string[];
  info: Record<string, unknown>;
}

export interface EnvStepResponse {
  observation: string;
  reward: number;
  done: boolean;
  admissible_actions: string[];
  info: Record<string, unknown>;
}

/**
 * `POST /env/reset` and `POST /env/step`: the interactive task's training environment served to
 * the agent, every step handed to the run's RolloutRecorder. A step that ends an episode answers
 * only after any rollout batch it completed is recorded.
 */
@Injectable()
export class EnvService {
  async reset(run: ActiveRun, seed: number | undefined): Promise<EnvResetResponse> {
    const env = environmentOf(run);
    if (run.sessions.size + run.pendingSessions >= MAX_OPEN_SESSIONS) {
      throw new HttpException(
        { statusCode: 429, error: `this run already has ${MAX_OPEN_SESSIONS} unfinished sessions; finish some episodes first` },
        HttpStatus.TOO_MANY_REQUESTS,
      );
    }
    const { id, ordinal } = run.nextSessionId();
    const chosenSeed = seed ?? ordinal;
    run.pendingSessions++;
    try {
      const training = await guarded('start-up', () => run.trainingEnvironment(env));
      const session = await guarded('reset', () => training.createSession(chosenSeed));
      const first = await guarded('reset', () => session.reset());
      if (run.environmentIsClosed) {
        await Promise.resolve(session.close?.()).catch(() => undefined);
        throw new ConflictException({ statusCode: 409, error: 'the run has ended; no new sessions' });
      }
      run.sessions.set(id, new OpenSession(session, chosenSeed));
      run.rollouts!.begin(id, chosenSeed, first);
      return { session_id: id, observation: first.observation, admissible_actions: first.admissibleActions, info: first.info };
    } finally {
      run.pendingSessions--;
    }
  }

  async step(run: ActiveRun, sessionId: string, action: string): Promise<EnvStepResponse> {
    environmentOf(run);
    const open = run.sessions.get(sessionId);
    if (!open) {
      if (run.sessionFinished(sessionId)) {
        throw new ConflictException({ statusCode: 409, error: `session ${sessionId} has finished its episode; call /env/reset for a new one` });
      }
      throw new NotFoundException({ statusCode: 404, error: `unknown session_id "${sessionId}"; call /env/reset first` });
    }
    // One step at a time per session: a second request waits for the first rather than racing it,
    // and finds the session finished if the first step ended the episode.
    const { result, recorded } = await open.serialize(async () => {
      if (run.sessions.get(sessionId) !== open) {
        throw new ConflictException({ statusCode: 409, error: `session ${sessionId} has finished its episode; call /env/reset for a new one` });
      }
      const result = await guarded('step', () => open.session.step(action));
      if (result.done) {
        run.sessions.delete(sessionId);
        void Promise.resolve(open.session.close?.()).catch(() => undefined);
      }
      // Handed to the recorder inside the queue, so a session's steps are recorded in the order they ran.
      return { result, recorded: run.rollouts!.step(sessionId, open.seed, action, result) };
    });
    try {
      await recorded;
    } catch (err) {
      throw new ServiceUnavailableException({ statusCode: 503, error: `the rollout could not be recorded: ${(err as Error).message}` });
    }
    return { observation: result.observation, reward: result.reward, done: result.done, admissible_actions: result.admissibleActions, info: result.info };
  }
}

function environmentOf(run: ActiveRun): InteractiveEnvironment {
  const env = run.ctx.task.environment;
  if (!env || !run.rollouts) {
    throw new NotFoundException({ statusCode: 404, error: `task ${run.ctx.task.id} is not interactive: it has no /env endpoints` });
  }
  return env;
}

/** An environment that throws is a harness bug (or its server is down): say so rather than blame the agent. */
async function guarded<R>(what: string, call: () => R | Promise<R>): Promise<R> {
  try {
    return await call();
  } catch (err) {
    if (err instanceof RangeError) throw new BadRequestException({ statusCode: 400, error: err.message });
    throw new InternalServerErrorException({ statusCode: 500, error: `the environment failed during ${what}: ${(err as Error).message}` });
  }
}
