import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { type WebSocket, WebSocketServer } from 'ws';
import { z } from 'zod';
import type { Json } from './payloads.js';

/*
 * The gateway half of the emulator: plain-JSON frames (discord.js sends no `compress` without zlib-sync),
 * HELLO → IDENTIFY → READY (+ whatever `onIdentify` dispatches, e.g. GUILD_CREATE), heartbeats with ACKs,
 * RESUME with replay of every event after the client's sequence, and a switch to drop the connection.
 */

export interface GatewayFrame {
  op: number;
  d: unknown;
  at: number;
  /** Which URL path the socket connected to (`/gateway` or `/gateway-resume`). */
  path: string;
}

interface DispatchEvent {
  op: 0;
  t: string;
  s: number;
  d: unknown;
}

interface Session {
  id: string;
  sequence: number;
  events: DispatchEvent[];
  socket: WebSocket | undefined;
  intents: number;
}

const inboundFrame = z.object({ op: z.number().int(), d: z.unknown() });
const identifyData = z.object({ token: z.string(), intents: z.number().int() });
const resumeData = z.object({ token: z.string(), session_id: z.string(), seq: z.number().int().nullable() });

export interface GatewayOptions {
  token: string;
  heartbeatIntervalMs: number;
  /** The URL the READY payload advertises for resuming. */
  resumeUrl: () => string;
  /** Builds READY's `d` for a new session id. */
  readyPayload: (sessionId: string) => Json;
  /** Called after READY is sent so the emulator can dispatch GUILD_CREATE etc. */
  onIdentify: () => void;
}

export interface EmulatorGateway {
  /** Every frame the client sent, in order. */
  readonly frames: GatewayFrame[];
  /** Dispatch an event (delivered now, or replayed on RESUME if the client is disconnected). */
  dispatch(type: string, data: unknown): void;
  /** Kill the TCP connection without a close frame, as a network failure would. */
  drop(): void;
  connected(): boolean;
  sessionId(): string | undefined;
  /** The intents the client identified with. */
  intents(): number;
  handleUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void;
  close(): void;
}

export function createGateway(options: GatewayOptions): EmulatorGateway {
  const server = new WebSocketServer({ noServer: true });
  const frames: GatewayFrame[] = [];
  let session: Session | undefined;

  function send(socket: WebSocket, payload: unknown): void {
    if (socket.readyState === socket.OPEN) socket.send(JSON.stringify(payload));
  }

  function dispatch(type: string, data: unknown): void {
    if (session === undefined) return;
    session.sequence += 1;
    const event: DispatchEvent = { op: 0, t: type, s: session.sequence, d: data };
    session.events.push(event);
    if (session.socket !== undefined) send(session.socket, event);
  }

  function onFrame(socket: WebSocket, path: string, raw: string): void {
    let frame: z.infer<typeof inboundFrame>;
    try {
      frame = inboundFrame.parse(JSON.parse(raw));
    } catch {
      socket.close(4002, 'Error while decoding payload.');
      return;
    }
    frames.push({ op: frame.op, d: frame.d, at: Date.now(), path });
    switch (frame.op) {
      case 1: {
        send(socket, { op: 11, d: null });
        return;
      }
      case 2: {
        const identify = identifyData.safeParse(frame.d);
        if (!identify.success || identify.data.token !== options.token) {
          socket.close(4004, 'Authentication failed.');
          return;
        }
        if (session?.socket !== undefined && session.socket !== socket) session.socket.terminate();
        session = {
          id: randomBytes(16).toString('hex'),
          sequence: 0,
          events: [],
          socket,
          intents: identify.data.intents,
        };
        dispatch('READY', options.readyPayload(session.id));
        options.onIdentify();
        return;
      }
      case 6: {
        const resume = resumeData.safeParse(frame.d);
        if (!resume.success || session === undefined || resume.data.session_id !== session.id) {
          // Not resumable: the client must identify again.
          send(socket, { op: 9, d: false });
          return;
        }
        session.socket = socket;
        const after = resume.data.seq ?? 0;
        for (const event of session.events) if (event.s > after) send(socket, event);
        dispatch('RESUMED', null);
        return;
      }
      default:
        return;
    }
  }

  server.on('connection', (socket: WebSocket, request: IncomingMessage) => {
    const path = new URL(request.url ?? '/', 'http://emulator').pathname;
    send(socket, { op: 10, d: { heartbeat_interval: options.heartbeatIntervalMs } });
    socket.on('message', (data) => onFrame(socket, path, data.toString()));
    socket.on('close', () => {
      if (session?.socket === socket) session.socket = undefined;
    });
  });

  return {
    frames,
    dispatch,
    drop() {
      const socket = session?.socket;
      if (session !== undefined) session.socket = undefined;
      socket?.terminate();
    },
    connected: () => session?.socket !== undefined,
    sessionId: () => session?.id,
    intents: () => session?.intents ?? 0,
    handleUpgrade(request, socket, head) {
      server.handleUpgrade(request, socket, head, (client) => server.emit('connection', client, request));
    },
    close() {
      for (const client of server.clients) client.terminate();
      server.close();
    },
  };
}
