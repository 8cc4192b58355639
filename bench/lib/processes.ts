import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/** Linux's USER_HZ: /proc times are in hundredths of a second. */
const TICKS_PER_SECOND = 100;

/** User + system CPU seconds a process has used so far (Linux, from /proc). */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) start at state, field 3; utime and stime are 14, 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
}

/** A free TCP port on 127.0.0.1 (bind to 0, read it, release it). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export interface StartedChild {
  child: ChildProcess;
  /** Stderr collected so far (for error messages). */
  stderr(): string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves when the process has exited. */
  stop(graceMs?: number): Promise<void>;
}

/** Spawns `node --import tsx <script>` from the repository root with the given environment. */
export function startNodeChild(
  script: string,
  environment: Record<string, string | undefined>,
  nodeArguments: readonly string[] = [],
): StartedChild {
  const child = spawn(process.execPath, [...nodeArguments, '--import', 'tsx', script], {
    cwd: process.cwd(),
    env: environment,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-8000);
  });
  // Drain stdout so a chatty child never blocks on a full pipe.
  child.stdout?.resume();
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
  return {
    child,
    stderr: () => stderr,
    async stop(graceMs = 10_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Polls `url` until it answers (any status) or `timeoutMs` passes; fails early if `child` exits. */
export async function waitForHttp(url: string, child: StartedChild, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.child.exitCode !== null) {
      throw new Error(`child exited with ${child.child.exitCode} before answering:\n${child.stderr()}`);
    }
    try {
      const response = await fetch(url);
      await response.arrayBuffer();
      return;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms:\n${child.stderr()}`);
}

/** Runs `node --import tsx <script> <argument>` to completion and returns its stdout. */
export async function runNodeScript(script: string, argument: string, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', script, argument],
      { cwd: process.cwd(), timeout: Math.ceil(timeoutMs), maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`${script} failed: ${error.message}\n${stderr}`));
        else resolve(stdout);
      },
    );
  });
}
