/*
 * Nodes the emulated cluster lists. Shape: core/v1 Node (client-node 1.4.0 V1Node / V1NodeStatus, from
 * OpenAPI v1.34.0): `status.allocatable` and `status.capacity` are resource quantities as strings; the
 * NVIDIA device plugin advertises GPUs as the extended resource `nvidia.com/gpu`; the Ready condition is
 * the kubelet's heartbeat.
 */

function node(name: string, gpus: number, ready: boolean) {
  const resources = {
    cpu: '32',
    memory: '263856776Ki',
    pods: '110',
    ...(gpus > 0 ? { 'nvidia.com/gpu': String(gpus) } : {}),
  };
  return {
    metadata: {
      name,
      uid: `node-${name}`,
      resourceVersion: '100',
      creationTimestamp: '2024-05-01T00:00:00Z',
      labels: { 'kubernetes.io/hostname': name, ...(gpus > 0 ? { 'nvidia.com/gpu.present': 'true' } : {}) },
    },
    spec: {},
    status: {
      capacity: resources,
      allocatable: resources,
      conditions: [
        {
          type: 'Ready',
          status: ready ? 'True' : 'False',
          reason: ready ? 'KubeletReady' : 'KubeletNotReady',
          message: ready ? 'kubelet is posting ready status' : 'container runtime network not ready',
          lastHeartbeatTime: '2024-05-01T00:00:00Z',
          lastTransitionTime: '2024-05-01T00:00:00Z',
        },
      ],
      nodeInfo: { kubeletVersion: 'v1.31.0', containerRuntimeVersion: 'containerd://1.7.20' },
    },
  };
}

/** Two 8-GPU nodes (one not ready) and a CPU node. */
export const GPU_NODES = [
  node('gpu-node-1', 8, true),
  node('gpu-node-2', 8, false),
  node('cpu-node-1', 0, true),
];
