import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { SHUTDOWN_FORCE_EXIT_MS } from '../../src/app/shutdown.js';

/*
 * Issue 10 item 16. No Docker engine runs here, so the image and compose files are checked as text:
 * what must be there is there, and the numbers agree with the app.
 */

const dockerfile = readFileSync('Dockerfile', 'utf8');
const dockerignore = readFileSync('.dockerignore', 'utf8')
  .split('\n')
  .map((line) => line.trim())
  .filter((line) => line !== '' && !line.startsWith('#'));
const compose = readFileSync('docker-compose.yml', 'utf8');
const packageJson = JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> };

/** The final stage's instructions (after the last FROM), continuation lines joined. */
function finalStage(): string[] {
  const lines = dockerfile.replace(/\\\n/g, ' ').split('\n');
  const lastFrom = lines.map((line) => /^FROM\s/i.test(line)).lastIndexOf(true);
  return lines.slice(lastFrom).filter((line) => line.trim() !== '' && !line.trim().startsWith('#'));
}

/** One service's block of docker-compose.yml (two-space indented under `services:`). */
function service(name: string): string {
  const match = new RegExp(`^  ${name}:\\n((?:(?:    .*)?\\n)*)`, 'm').exec(`${compose}\n`);
  if (match?.[1] === undefined) throw new Error(`no service ${name} in docker-compose.yml`);
  return match[1];
}

describe('the container image', () => {
  it('keeps .env and data/ out of the build context', () => {
    expect(dockerignore).toContain('.env');
    expect(dockerignore.some((line) => /^\.env\.\*$/.test(line))).toBe(true);
    expect(dockerignore.some((line) => /^data\/?$/.test(line))).toBe(true);
  });

  it('runs compiled node as a non-root user under an init, with fonts and a HEALTHCHECK', () => {
    const stage = finalStage();
    const users = stage.filter((line) => /^USER\s/.test(line));
    expect(users.length).toBeGreaterThan(0);
    expect(users.at(-1)).not.toMatch(/^USER\s+(root|0)(\s|:|$)/);
    const install = stage.find((line) => /apt-get install/.test(line)) ?? '';
    expect(install).toMatch(/\btini\b/);
    expect(install).toMatch(/\bfonts-/);
    expect(install).toMatch(/\bpython3\b/);
    expect(stage).toContain('ENTRYPOINT ["/usr/bin/tini", "--"]');
    expect(stage).toContain('CMD ["node", "dist/src/app/main.js"]');
    expect(
      stage.some((line) => /^HEALTHCHECK .*CMD \["node", "dist\/src\/app\/healthcheck\.js"\]/.test(line)),
    ).toBe(true);
    // The build stage really produces what the final stage runs.
    expect(dockerfile).toMatch(/RUN npm run build/);
    expect(packageJson.scripts.build).toContain('tsc -p tsconfig.json');
    expect(stage.some((line) => line.includes('--from=build /app/dist/src'))).toBe(true);
    expect(stage.some((line) => /npm start|tsx/.test(line))).toBe(false);
  });
});

describe('docker compose', () => {
  it('restarts services, outlasts the app shutdown on stop, and reaches the host', () => {
    for (const name of ['bot', 'worker']) {
      const block = service(name);
      expect(block, name).toMatch(/^ {4}restart: unless-stopped$/m);
      const grace = /^ {4}stop_grace_period: (\d+)s$/m.exec(block)?.[1];
      expect(grace, name).toBeDefined();
      expect(Number(grace) * 1000, name).toBeGreaterThan(SHUTDOWN_FORCE_EXIT_MS);
      expect(block, name).toMatch(/^ {6}- "host\.docker\.internal:host-gateway"$/m);
    }
    expect(service('redis')).toMatch(/restart: unless-stopped/);
  });

  it('passes the playground token through and keeps the playground on host loopback', () => {
    const bot = service('bot');
    expect(bot).toMatch(/SHEPHERD_PLAYGROUND_TOKEN: \$\{SHEPHERD_PLAYGROUND_TOKEN:-\}/);
    expect(bot).toMatch(/- "127\.0\.0\.1:3000:3000"/);
  });
});

describe('workspace and GPUs (issue 26 §6)', () => {
  it('keeps examples/ in the image, where the default workspace (WORKDIR) finds them', () => {
    const stage = finalStage();
    expect(stage).toContain('WORKDIR /app');
    expect(stage.some((line) => /^COPY examples \.\/examples$/.test(line))).toBe(true);
    expect(dockerignore.some((line) => /^examples\/?$/.test(line))).toBe(false);
  });

  it('mounts a workspace into the bot and the workers and points SHEPHERD_WORKSPACE at it', () => {
    for (const name of ['bot', 'worker']) {
      const block = service(name);
      expect(block, name).toMatch(/^ {6}SHEPHERD_WORKSPACE: \/workspace$/m);
      expect(block, name).toMatch(/^ {6}- \$\{SHEPHERD_WORKSPACE_DIR:-\.\}:\/workspace$/m);
    }
  });

  it('reserves the GPUs for the workers, with the way out for CPU-only hosts said beside it', () => {
    const worker = service('worker');
    const reservation =
      /^ {4}deploy:\n(?: {6}.*\n)*? {6}resources:\n {8}reservations:\n {10}devices:\n {12}- driver: nvidia\n {14}count: all\n {14}capabilities: \[gpu\]$/m;
    expect(worker).toMatch(reservation);
    expect(worker).toMatch(/# CPU-only host.*comment out `resources:`/);
  });
});
