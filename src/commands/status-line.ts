import cliProgress from 'cli-progress';

/**
 * The CLI's one progress component for a single status line (a run's time and best, verify's stage,
 * a download): on a terminal, one line that rewrites itself, drawn by cli-progress as the campaign
 * printer's bars are; elsewhere plain lines, as often as the caller says (`plain`), so a log read
 * later is not flooded. `stop()` ends the terminal line (call it on every path: the bar redraws on a
 * timer until stopped).
 */
export class StatusLine {
  private bar: cliProgress.SingleBar | null = null;

  constructor(private readonly stream: NodeJS.WriteStream = process.stderr) {}

  /** Whether the line rewrites itself (stderr is a terminal). */
  get live(): boolean {
    return this.stream.isTTY === true;
  }

  /** Shows `line` (already inert): redrawn in place on a terminal; printed as its own line otherwise when `plain` is true. */
  show(line: string, plain = true): void {
    if (!this.live) {
      if (plain) this.stream.write(`${line}\n`);
      return;
    }
    if (this.bar) {
      this.bar.update(0, { line });
      return;
    }
    // Only the payload is drawn; no cursor or line-wrap games, no signal handlers of its own (src/commands/interrupt.ts has those).
    this.bar = new cliProgress.SingleBar({ format: '{line}', stream: this.stream, hideCursor: false, linewrap: null, gracefulExit: false, clearOnComplete: false, fps: 10 });
    this.bar.start(1, 0, { line });
  }

  /** Ends the terminal line (a newline after the last state); nothing when none was drawn. */
  stop(): void {
    this.bar?.stop();
    this.bar = null;
  }
}
