// Store URLs as the settings name them. The adapters' openers (infra/) and the shell's configuration
// check (src/config/) read the same URL forms, so the parsing lives here, below both.

/** `sqlite:///abs/file.db` or `sqlite://relative/file.db` (same for `file://`) → a filesystem path. */
export function sqlitePath(url: string): string {
  return url.replace(/^(sqlite|file):\/\//, '');
}
