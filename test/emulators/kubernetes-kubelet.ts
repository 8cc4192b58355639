import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { WireConfigMap, WireContainerState, WirePod } from './kubernetes-objects.js';

/*
 * The emulator's kubelet. Each pod either runs its container for real (the command as a child process,
 * its volumes as host directories: ConfigMap files written out, an emptyDir in the pod's sandbox, a PVC as
 * a host directory the test names, the paths in argv/env/workingDir mapped onto them, the env resolved
 * with configMapKeyRef, fieldRef and `$(VAR)` as the kubelet does) whose stdout and stderr become the pod
 * log, or is held in a scripted state the test chooses (Unschedulable, an image that cannot be pulled).
 * Deleting a pod is graceful like the kubelet's: SIGTERM to the container's first process, SIGKILL to
 * all of it after terminationGracePeriodSeconds.
 *
 * Status shapes follow V1PodStatus / V1ContainerStatus / V1ContainerState (client-node 1.4.0 models,
 * OpenAPI v1.34.0); reasons (`Completed`, `Error`, `OOMKilled`, `ErrImagePull`, `ImagePullBackOff`,
 * `Unschedulable`, `ContainerCreating`) are the kubelet's and the scheduler's own.
 */

export type PodBehaviour =
  | { kind: 'run' }
  | { kind: 'unschedulable'; message: string }
  | { kind: 'image-pull-error'; message: string };

export interface LogEntry {
  timestamp: string;
  text: string;
  /** False for a last line the process ended without a newline. */
  newline: boolean;
}

interface PodRuntime {
  pod: WirePod;
  process?: ChildProcess;
  log: LogEntry[];
  listeners: Set<() => void>;
  ended: boolean;
  oomKilled: boolean;
  graceTimer?: NodeJS.Timeout;
}

export interface KubeletOptions {
  sandboxRoot: string;
  /** PVC claim name → host directory standing in for the volume. */
  volumes: Readonly<Record<string, string>>;
  /** The interpreter `python`/`python3` in a container command means here. */
  python: string;
  configMap: (namespace: string, name: string) => WireConfigMap | undefined;
  behaviour: (pod: WirePod) => PodBehaviour;
  /** A pod's status changed (the Job controller reconciles). */
  changed: () => void;
  /** The pod is gone from the API. */
  removed: (pod: WirePod) => void;
}

const baseNs = BigInt(Date.now()) * 1_000_000n;
const baseHr = process.hrtime.bigint();

/** RFC 3339 with nanoseconds, trailing zeros trimmed, as Go's time.RFC3339Nano prints the kubelet's stamps. */
export function nanoTimestamp(): string {
  const ns = baseNs + (process.hrtime.bigint() - baseHr);
  const seconds = new Date(Number(ns / 1_000_000n)).toISOString().slice(0, 19);
  const fraction = (ns % 1_000_000_000n).toString().padStart(9, '0').replace(/0+$/, '');
  return `${seconds}${fraction === '' ? '' : `.${fraction}`}Z`;
}

/** metav1.Time: RFC 3339 in whole seconds. */
export function metaTime(date = new Date()): string {
  return `${date.toISOString().slice(0, 19)}Z`;
}

function condition(type: string, status: string, extra: Record<string, string> = {}) {
  return { type, status, lastProbeTime: null, lastTransitionTime: metaTime(), ...extra };
}

/** Where `text` names a mount path, the host directory instead (the container's view of its files). */
function mapPaths(text: string, mounts: ReadonlyArray<{ mountPath: string; hostPath: string }>): string {
  let result = text;
  for (const mount of [...mounts].sort((a, b) => b.mountPath.length - a.mountPath.length)) {
    const escaped = mount.mountPath.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    result = result.replace(new RegExp(`${escaped}(?=/|:|$)`, 'g'), mount.hostPath);
  }
  return result;
}

/** `$(NAME)` references to earlier variables, as the kubelet expands them in env, command and args. */
function expand(text: string, variables: Record<string, string>): string {
  return text.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (whole, name: string) => variables[name] ?? whole);
}

function fieldValue(pod: WirePod, fieldPath: string): string | undefined {
  const annotation = /^metadata\.annotations\['(.+)'\]$/.exec(fieldPath);
  if (annotation?.[1] !== undefined) return pod.metadata.annotations?.[annotation[1]];
  const label = /^metadata\.labels\['(.+)'\]$/.exec(fieldPath);
  if (label?.[1] !== undefined) return pod.metadata.labels?.[label[1]];
  const fields: Record<string, string | undefined> = {
    'metadata.name': pod.metadata.name,
    'metadata.namespace': pod.metadata.namespace,
    'metadata.uid': pod.metadata.uid,
    'spec.nodeName': pod.spec.nodeName,
    'status.podIP': pod.status?.podIP,
  };
  return fields[fieldPath];
}

export function createKubelet(options: KubeletOptions) {
  const runtimes = new Map<string, PodRuntime>();
  const keyOf = (pod: WirePod) => `${pod.metadata.namespace}/${pod.metadata.name}`;

  function setContainer(runtime: PodRuntime, state: WireContainerState, ready: boolean): void {
    const container = runtime.pod.spec.containers[0];
    runtime.pod.status = {
      ...runtime.pod.status,
      containerStatuses: [
        {
          name: container?.name ?? 'main',
          image: container?.image ?? '',
          imageID: state.waiting === undefined ? `${container?.image}@sha256:${'0'.repeat(64)}` : '',
          ready,
          restartCount: 0,
          started: state.running !== undefined,
          state,
        },
      ],
    };
    options.changed();
  }

  function schedule(runtime: PodRuntime, node: string): void {
    runtime.pod.spec.nodeName = node;
    runtime.pod.status = {
      ...runtime.pod.status,
      hostIP: '10.0.0.11',
      podIP: `10.244.0.${runtimes.size + 10}`,
      startTime: metaTime(),
      conditions: [condition('PodScheduled', 'True')],
    };
  }

  function appendLog(runtime: PodRuntime, entries: LogEntry[]): void {
    runtime.log.push(...entries);
    for (const listener of runtime.listeners) listener();
  }

  /** One reader per stream: all lines of one pipe read share a timestamp (a coarse clock does that too). */
  function capture(runtime: PodRuntime, stream: NodeJS.ReadableStream): () => void {
    let partial = '';
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      const timestamp = nanoTimestamp();
      const lines = (partial + chunk).split('\n');
      partial = lines.pop() ?? '';
      appendLog(
        runtime,
        lines.map((text) => ({ timestamp, text, newline: true })),
      );
    });
    return () => {
      if (partial !== '') appendLog(runtime, [{ timestamp: nanoTimestamp(), text: partial, newline: false }]);
      partial = '';
    };
  }

  /** Volumes as host directories; undefined while a ConfigMap the pod needs is missing. */
  function mountVolumes(runtime: PodRuntime, sandbox: string) {
    const { pod } = runtime;
    const mounts: Array<{ mountPath: string; hostPath: string }> = [];
    for (const mount of pod.spec.containers[0]?.volumeMounts ?? []) {
      const volume = pod.spec.volumes?.find((entry) => entry.name === mount.name);
      let hostPath = path.join(sandbox, 'volumes', mount.name);
      if (volume?.configMap !== undefined) {
        const configMap = options.configMap(pod.metadata.namespace ?? '', volume.configMap.name);
        if (configMap === undefined) return undefined;
        const items =
          volume.configMap.items ?? Object.keys(configMap.data ?? {}).map((key) => ({ key, path: key }));
        for (const item of items) {
          const file = path.join(hostPath, item.path);
          mkdirSync(path.dirname(file), { recursive: true });
          writeFileSync(file, configMap.data?.[item.key] ?? '');
        }
      } else if (volume?.persistentVolumeClaim !== undefined) {
        hostPath = path.join(
          options.volumes[volume.persistentVolumeClaim.claimName] ?? sandbox,
          mount.subPath ?? '',
        );
      }
      mkdirSync(hostPath, { recursive: true });
      mounts.push({ mountPath: mount.mountPath, hostPath });
    }
    return mounts;
  }

  /** The container's environment; a string naming what is missing when a referenced ConfigMap key is not there. */
  function resolveEnvironment(pod: WirePod): Record<string, string> | string {
    const variables: Record<string, string> = {};
    for (const variable of pod.spec.containers[0]?.env ?? []) {
      const from = variable.valueFrom;
      if (from?.configMapKeyRef !== undefined) {
        const { name, key } = from.configMapKeyRef;
        const value = options.configMap(pod.metadata.namespace ?? '', name)?.data?.[key];
        if (value === undefined) return `configmap "${name}" or its key "${key}" not found`;
        variables[variable.name] = value;
      } else if (from?.fieldRef !== undefined) {
        variables[variable.name] = fieldValue(pod, from.fieldRef.fieldPath) ?? '';
      } else {
        variables[variable.name] = expand(variable.value ?? '', variables);
      }
    }
    return variables;
  }

  function startContainer(runtime: PodRuntime): void {
    const { pod } = runtime;
    const container = pod.spec.containers[0];
    const sandbox = path.join(options.sandboxRoot, pod.metadata.uid ?? 'pod');
    mkdirSync(sandbox, { recursive: true });
    const mounts = mountVolumes(runtime, sandbox);
    const variables = resolveEnvironment(pod);
    if (mounts === undefined || typeof variables === 'string') {
      // The kubelet retries until the ConfigMap is there.
      const reason = mounts === undefined ? 'ContainerCreating' : 'CreateContainerConfigError';
      setContainer(
        runtime,
        { waiting: { reason, ...(typeof variables === 'string' ? { message: variables } : {}) } },
        false,
      );
      setTimeout(() => {
        if (!runtime.ended && runtimes.has(keyOf(pod))) startContainer(runtime);
      }, 50).unref();
      return;
    }
    const environment: Record<string, string> = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: sandbox };
    for (const [name, value] of Object.entries(variables)) environment[name] = mapPaths(value, mounts);
    const words = [...(container?.command ?? []), ...(container?.args ?? [])].map((word) =>
      mapPaths(expand(word, variables), mounts),
    );
    const [program = 'true', ...rest] = words;
    const child = spawn(program === 'python' || program === 'python3' ? options.python : program, rest, {
      cwd: container?.workingDir === undefined ? sandbox : mapPaths(container.workingDir, mounts),
      env: environment,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    runtime.process = child;
    const flushOut = child.stdout === null ? () => undefined : capture(runtime, child.stdout);
    const flushErr = child.stderr === null ? () => undefined : capture(runtime, child.stderr);
    const startedAt = metaTime();
    pod.status = { ...pod.status, phase: 'Running' };
    setContainer(runtime, { running: { startedAt } }, true);
    child.on('error', (error) =>
      appendLog(runtime, [{ timestamp: nanoTimestamp(), text: String(error), newline: true }]),
    );
    child.on('close', (code, signal) => {
      flushOut();
      flushErr();
      const exitCode = code ?? (signal === 'SIGKILL' ? 137 : signal === 'SIGTERM' ? 143 : 128);
      const reason = runtime.oomKilled ? 'OOMKilled' : exitCode === 0 ? 'Completed' : 'Error';
      pod.status = { ...pod.status, phase: exitCode === 0 ? 'Succeeded' : 'Failed' };
      runtime.ended = true;
      clearTimeout(runtime.graceTimer);
      setContainer(runtime, { terminated: { exitCode, reason, startedAt, finishedAt: metaTime() } }, false);
      for (const listener of runtime.listeners) listener();
      if (pod.metadata.deletionTimestamp !== undefined) remove(runtime);
    });
  }

  function remove(runtime: PodRuntime): void {
    runtimes.delete(keyOf(runtime.pod));
    runtime.ended = true;
    for (const listener of runtime.listeners) listener();
    options.removed(runtime.pod);
  }

  function signal(runtime: PodRuntime, name: NodeJS.Signals, group: boolean): void {
    const pid = runtime.process?.pid;
    if (pid === undefined || runtime.ended) return;
    try {
      process.kill(group ? -pid : pid, name);
    } catch {
      // Already gone.
    }
  }

  return {
    /** A new pod from the Job controller: schedule it and start its container (or hold it as scripted). */
    start(pod: WirePod): void {
      const runtime: PodRuntime = { pod, log: [], listeners: new Set(), ended: false, oomKilled: false };
      runtimes.set(keyOf(pod), runtime);
      pod.status = { phase: 'Pending', conditions: [] };
      const behaviour = options.behaviour(pod);
      if (behaviour.kind === 'unschedulable') {
        pod.status.conditions = [
          condition('PodScheduled', 'False', { reason: 'Unschedulable', message: behaviour.message }),
        ];
        options.changed();
        return;
      }
      schedule(runtime, 'gpu-node-1');
      if (behaviour.kind === 'image-pull-error') {
        setContainer(runtime, { waiting: { reason: 'ErrImagePull', message: behaviour.message } }, false);
        setTimeout(() => {
          const image = pod.spec.containers[0]?.image ?? '';
          if (runtimes.has(keyOf(pod))) {
            setContainer(
              runtime,
              { waiting: { reason: 'ImagePullBackOff', message: `Back-off pulling image "${image}"` } },
              false,
            );
          }
        }, 30).unref();
        return;
      }
      setContainer(runtime, { waiting: { reason: 'ContainerCreating' } }, false);
      setImmediate(() => startContainer(runtime));
    },
    /** Graceful deletion: SIGTERM now, SIGKILL to everything after `graceSeconds`; the pod goes when it exits. */
    delete(pod: WirePod, graceSeconds: number): void {
      const runtime = runtimes.get(keyOf(pod));
      if (runtime === undefined || pod.metadata.deletionTimestamp !== undefined) return;
      pod.metadata.deletionTimestamp = metaTime(new Date(Date.now() + graceSeconds * 1000));
      pod.metadata.deletionGracePeriodSeconds = graceSeconds;
      if (runtime.process === undefined || runtime.ended) {
        remove(runtime);
        return;
      }
      signal(runtime, 'SIGTERM', false);
      runtime.graceTimer = setTimeout(() => signal(runtime, 'SIGKILL', true), graceSeconds * 1000);
      options.changed();
    },
    /** The kernel's OOM killer, as the kubelet reports it (`OOMKilled`, exit 137). */
    oomKill(namespace: string, name: string): boolean {
      const runtime = runtimes.get(`${namespace}/${name}`);
      if (runtime?.process === undefined || runtime.ended) return false;
      runtime.oomKilled = true;
      signal(runtime, 'SIGKILL', true);
      return true;
    },
    runtime: (namespace: string, name: string) => runtimes.get(`${namespace}/${name}`),
    /** SIGKILL every process this kubelet started (by its own pids) and wait for them. */
    async stopAll(): Promise<void> {
      const running = [...runtimes.values()].filter(
        (runtime) => runtime.process !== undefined && !runtime.ended,
      );
      const exits = running.map(
        (runtime) => new Promise((resolve) => runtime.process?.once('close', resolve)),
      );
      for (const runtime of running) signal(runtime, 'SIGKILL', true);
      await Promise.all(exits);
    },
  };
}

export type Kubelet = ReturnType<typeof createKubelet>;
