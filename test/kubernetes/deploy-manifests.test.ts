import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { loadAllYaml } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { loadConfig } from '../../src/config/config.js';
import { REPOSITORY } from './kubernetes-harness.js';

/*
 * deploy/kubernetes/ holds together: the manifests parse, live in the namespace the Role covers, run as
 * the ServiceAccount the Role is bound to, mount the runs PVC where Shepherd keeps run directories, and
 * their configuration is one Shepherd's config accepts. (The Role's verbs are checked against the
 * executor's calls in kubernetes-executor.test.ts.)
 */

const document = z.looseObject({
  kind: z.string(),
  metadata: z.looseObject({ name: z.string(), namespace: z.string().optional() }),
});

const mountSchema = z.object({ name: z.string(), mountPath: z.string() });
const deploymentSchema = z.looseObject({
  spec: z.looseObject({
    template: z.looseObject({
      spec: z.looseObject({
        serviceAccountName: z.string(),
        containers: z.array(
          z.looseObject({
            env: z.array(z.object({ name: z.string(), value: z.string() })),
            volumeMounts: z.array(mountSchema),
          }),
        ),
        volumes: z.array(
          z.looseObject({ name: z.string(), persistentVolumeClaim: z.object({ claimName: z.string() }) }),
        ),
      }),
    }),
  }),
});

async function manifests() {
  const all: Array<z.infer<typeof document> & Record<string, unknown>> = [];
  for (const file of ['rbac.yaml', 'redis.yaml', 'shepherd.yaml']) {
    const text = await readFile(path.join(REPOSITORY, 'deploy/kubernetes', file), 'utf8');
    for (const raw of loadAllYaml(text)) all.push(document.parse(raw));
  }
  return all;
}

describe('deploy/kubernetes', () => {
  it('is one namespace, the Role bound to the ServiceAccount the Deployments use', async () => {
    const all = await manifests();
    const namespaced = all.filter((entry) => !['ClusterRole', 'ClusterRoleBinding'].includes(entry.kind));
    expect(new Set(namespaced.map((entry) => entry.metadata.namespace))).toEqual(new Set(['ml']));
    const account = all.find((entry) => entry.kind === 'ServiceAccount')?.metadata.name;
    const deployments = all.filter(
      (entry) => entry.kind === 'Deployment' && entry.metadata.name.startsWith('shepherd'),
    );
    expect(deployments.map((entry) => entry.metadata.name).sort()).toEqual([
      'shepherd-bot',
      'shepherd-worker',
    ]);
    for (const deployment of deployments) {
      expect(deploymentSchema.parse(deployment).spec.template.spec.serviceAccountName).toBe(account);
    }
    const binding = z
      .looseObject({
        roleRef: z.object({ name: z.string() }),
        subjects: z.array(z.object({ name: z.string() })),
      })
      .parse(all.find((entry) => entry.kind === 'RoleBinding'));
    expect(binding.roleRef.name).toBe(all.find((entry) => entry.kind === 'Role')?.metadata.name);
    expect(binding.subjects.map((subject) => subject.name)).toEqual([account]);
  });

  it('is a configuration Shepherd accepts, whose runs PVC is mounted where the bot and workers keep run directories', async () => {
    const all = await manifests();
    const data = z
      .object({ data: z.record(z.string(), z.string()) })
      .parse(
        all.find((entry) => entry.kind === 'ConfigMap' && entry.metadata.name === 'shepherd-config'),
      ).data;
    const config = loadConfig({
      ...data,
      SHEPHERD_ROLE: 'bot',
      // The image's own environment (Dockerfile), and a filled-in Secret.
      SHEPHERD_HOST: '0.0.0.0',
      SHEPHERD_PLAYGROUND_TOKEN: 'a-long-enough-playground-token-for-the-test',
    });
    expect(config.kubernetes).toMatchObject({ namespace: 'ml', pvc: 'shepherd-runs', kubeconfig: undefined });
    expect(config.runs.backends).toEqual(['kubernetes']);
    const claims = all.filter((entry) => entry.kind === 'PersistentVolumeClaim');
    const runsClaim = z
      .looseObject({ spec: z.looseObject({ accessModes: z.array(z.string()) }) })
      .parse(claims.find((entry) => entry.metadata.name === config.kubernetes.pvc));
    expect(runsClaim.spec.accessModes).toEqual(['ReadWriteMany']);
    for (const name of ['shepherd-bot', 'shepherd-worker']) {
      const spec = deploymentSchema.parse(all.find((entry) => entry.metadata.name === name)).spec.template
        .spec;
      const volume = spec.volumes.find(
        (entry) => entry.persistentVolumeClaim.claimName === config.kubernetes.pvc,
      );
      const mount = spec.containers[0]?.volumeMounts.find((entry) => entry.name === volume?.name);
      expect(mount?.mountPath).toBe(path.join(config.dataDir, 'runs'));
    }
  });
});
