import { execFileSync } from 'node:child_process';

/** The unprivileged user the SHEPHERD_RUN_AS_USER tests start runs as. */
export const RUN_USER = 'shepherd-runner';

/** Makes sure `RUN_USER` exists (`useradd` when missing); returns why not, for the skip message. */
export function ensureRunUser(): string | undefined {
  if (process.getuid?.() !== 0) return 'the test process is not root';
  try {
    execFileSync('getent', ['passwd', RUN_USER], { stdio: 'ignore' });
    return undefined;
  } catch {
    // Missing: create it below.
  }
  try {
    execFileSync('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', RUN_USER], {
      stdio: 'ignore',
    });
    return undefined;
  } catch (error) {
    return `could not create ${RUN_USER} with useradd (${String(error)})`;
  }
}
