import { execFileSync, spawnSync } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * Real Podman for the local-container tests, with no registry: the image is a root filesystem holding
 * the host's /usr/bin/python3, its standard library and the shared libraries `ldd` names, imported with
 * `podman import`. `podmanSetup()` says why Podman cannot run here instead of throwing.
 */

const HOST_PYTHON = '/usr/bin/python3';
export const TEST_IMAGE = 'localhost/shepherd-test-python:stdlib';

interface PodmanSetup {
  /** Environment for the engine client (CONTAINERS_CONF when this host needs the adapted settings). */
  environment: Record<string, string>;
  /** What was needed to make it run, for the test log. */
  note: string;
}

function run(argv: string[], environment: NodeJS.ProcessEnv = process.env) {
  const [command = '', ...rest] = argv;
  const result = spawnSync(command, rest, { env: environment, encoding: 'utf8', timeout: 120_000 });
  const output = `${result.stdout ?? ''}${result.stderr ?? ''}${result.error === undefined ? '' : String(result.error)}`;
  return { ok: result.status === 0, output: output.trim() };
}

/** Shared libraries (absolute paths) the interpreter and its extension modules load. */
function sharedLibraries(files: readonly string[]): string[] {
  const found = new Set<string>();
  for (const file of files) {
    const listing = run(['ldd', file]);
    if (!listing.ok) continue;
    for (const match of listing.output.matchAll(/(\/\S+\.so[^\s]*)/g))
      if (match[1] !== undefined) found.add(match[1]);
  }
  return [...found];
}

function buildImage(): void {
  const real = execFileSync('readlink', ['-f', HOST_PYTHON], { encoding: 'utf8' }).trim();
  const stdlib = execFileSync(
    HOST_PYTHON,
    ['-c', 'import sysconfig; print(sysconfig.get_paths()["stdlib"])'],
    {
      encoding: 'utf8',
    },
  ).trim();
  const root = mkdtempSync(path.join(tmpdir(), 'shepherd-rootfs-'));
  try {
    for (const directory of ['usr/bin', 'tmp', 'etc', 'proc', 'sys', 'dev', 'run']) {
      mkdirSync(path.join(root, directory), { recursive: true });
    }
    chmodSync(path.join(root, 'tmp'), 0o1777);
    cpSync(real, path.join(root, real));
    if (path.join(root, real) !== path.join(root, HOST_PYTHON))
      symlinkSync(real, path.join(root, HOST_PYTHON));
    cpSync(stdlib, path.join(root, stdlib), {
      recursive: true,
      filter: (source) => !source.includes('__pycache__') && !source.endsWith('/test'),
    });
    const dynload = path.join(stdlib, 'lib-dynload');
    const modules = run(['find', dynload, '-name', '*.so']).output.split('\n').filter(Boolean);
    for (const library of sharedLibraries([real, ...modules])) {
      mkdirSync(path.dirname(path.join(root, library)), { recursive: true });
      cpSync(library, path.join(root, library), { dereference: true });
    }
    writeFileSync(path.join(root, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
    const tarball = `${root}.tar`;
    execFileSync('tar', ['-C', root, '-cf', tarball, '.']);
    try {
      const imported = run(['podman', 'import', tarball, TEST_IMAGE]);
      if (!imported.ok) throw new Error(`podman import failed: ${imported.output}`);
    } finally {
      rmSync(tarball, { force: true });
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

/** The hard limits this process may not raise: Podman's default ulimits are above them in some sandboxes. */
function hardLimit(name: string): string | undefined {
  const line = readFileSync('/proc/self/limits', 'utf8')
    .split('\n')
    .find((entry) => entry.startsWith(name));
  const fields = line?.slice(name.length).trim().split(/\s+/);
  return fields?.[1];
}

/**
 * Podman as this host allows it: first as installed; else, through a CONTAINERS_CONF of the test's own,
 * with runc (crun refuses a cgroup v1/v2 hybrid), ulimits within the hard limits (no CAP_SYS_RESOURCE
 * to raise them) and no network (the test runs need none; a minimal install may lack a working
 * bridge). Returns why not when neither runs a container.
 */
export function podmanSetup(): PodmanSetup | string {
  if (!run(['podman', '--version']).ok)
    return 'podman is not installed (apt-get install podman runc catatonit)';
  if (!run(['podman', 'image', 'exists', TEST_IMAGE]).ok) {
    try {
      buildImage();
    } catch (error) {
      return `could not build the test image: ${String(error)}`;
    }
  }
  const probe = (environment: Record<string, string>) =>
    run(['podman', 'run', '--rm', '--init', TEST_IMAGE, 'python3', '-c', 'print("podman-ok")'], {
      ...process.env,
      ...environment,
    });
  const plain = probe({});
  if (plain.ok && plain.output.includes('podman-ok')) return { environment: {}, note: 'podman as installed' };
  const nofile = hardLimit('Max open files') ?? '1024';
  // Podman lowers its own process limit (to 32768 here), so the container's must stay under that too.
  const ulimits = [`"nofile=${nofile}:${nofile}"`, '"nproc=4096:4096"'];
  const conf = path.join(mkdtempSync(path.join(tmpdir(), 'shepherd-podman-')), 'containers.conf');
  writeFileSync(
    conf,
    `[containers]\ndefault_ulimits = [${ulimits.join(', ')}]\nnetns = "none"\n[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n`,
  );
  const adapted = probe({ CONTAINERS_CONF: conf });
  if (adapted.ok && adapted.output.includes('podman-ok')) {
    return {
      environment: { CONTAINERS_CONF: conf },
      note: `podman with runc and host ulimits (${plain.output})`,
    };
  }
  return `podman cannot run a container here: ${plain.output}; with runc and host ulimits: ${adapted.output}`;
}

/** Containers (by exact name) still present: `podman ps -a` filtered by name. */
export function containersNamed(name: string, environment: Record<string, string>): string[] {
  const listed = run(['podman', 'ps', '-a', '--format', '{{.Names}}'], { ...process.env, ...environment });
  return listed.output.split('\n').filter((entry) => entry === name);
}

/** Remove a container this test created (by its exact name). */
export function removeContainer(name: string, environment: Record<string, string>): void {
  run(['podman', 'rm', '-f', '-t', '0', name], { ...process.env, ...environment });
}
