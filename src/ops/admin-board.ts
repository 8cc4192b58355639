import type { IncomingMessage, ServerResponse } from 'node:http';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import type { Queue } from 'bullmq';
import express from 'express';

export const ADMIN_BASE_PATH = '/admin/queues';

/** Bull Board for every queue, as a plain request listener the node:http server can call. */
export function createAdminBoard(
  queues: Queue[],
): (request: IncomingMessage, response: ServerResponse) => void {
  const serverAdapter = new ExpressAdapter();
  serverAdapter.setBasePath(ADMIN_BASE_PATH);
  createBullBoard({ queues: queues.map((queue) => new BullMQAdapter(queue)), serverAdapter });
  const app = express();
  app.disable('x-powered-by');
  app.use(ADMIN_BASE_PATH, serverAdapter.getRouter());
  return (request, response) => {
    app(request, response);
  };
}
