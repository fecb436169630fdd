# syntax=docker/dockerfile:1
# An a2rl campaign worker: the project, built, with what the sandbox and the process tracer need
# (docs/security.md). Build from the repository root:
#   docker build -f infra/deploy/worker.Dockerfile -t a2rl-worker .
# (worker.Dockerfile.dockerignore beside this file keeps node_modules, dist and .a2rl out of the context.)
#
# Build arguments:
#   AGENT_CLIS=1   also install the pinned agent CLIs (infra/agent-clis, about 1.3 GB; LLM agents need them)
#   PIP_EXTRA=…    Python packages for the paper's tasks on this image, e.g. "vllm" (docs/paper-tasks.md);
#                  leave empty when the workers grade through A2RL_INFERENCE_URL instead
#
# Documented, not tested in a2rl's CI (no container engine there).
FROM node:20-bookworm

# bubblewrap: the agent's sandbox; strace: process tracing; util-linux (setpriv, prlimit): the agent's
# uid and kernel limits; python3-pip: agents installing packages through the egress proxy;
# tini: PID 1 that reaps orphaned processes and passes SIGTERM on to the worker.
RUN apt-get update \
  && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
       bubblewrap strace util-linux python3-pip tini \
  && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/a2rl
COPY . .
# npm ci builds better-sqlite3 (the image has a compiler) and compiles the TypeScript (`prepare`).
RUN npm ci && npm cache clean --force
# a2rl's process tracer (modules/instrumentation/native/a2rl-trace.c), built now rather than at the
# first run; the build container may forbid ptrace, so only a failed compile fails the image.
RUN node -e "import('./dist/modules/instrumentation/ptrace-tracer.js').then((m) => { m.ptraceTracerBinary(); const p = m.ptraceTracerProblem() ?? ''; if (p.startsWith('cannot build')) { console.error(p); process.exit(1); } })"

ARG AGENT_CLIS=0
RUN if [ "$AGENT_CLIS" = 1 ]; then node src/bin/a2rl.js agents install; fi
ARG PIP_EXTRA=""
RUN if [ -n "$PIP_EXTRA" ]; then python3 -m pip install --no-cache-dir --break-system-packages $PIP_EXTRA; fi

# Everything the worker keeps on its own disk: datasets, the signing key (mount the ledger host's
# keys/ here), workspaces of the runs in flight.
ENV A2RL_HOME=/var/lib/a2rl
VOLUME /var/lib/a2rl

# The harness runs as root (a root harness: bwrap, then setpriv to the run's own uid with no
# capabilities). The container needs privileges for that: see the worker service in compose.yml.
ENTRYPOINT ["/usr/bin/tini", "--", "node", "/opt/a2rl/src/bin/a2rl.js"]
CMD ["worker", "--queue", "redis://redis:6379", "--slots", "1"]
