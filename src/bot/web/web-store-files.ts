import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { PlatformError } from '../../errors.js';
import {
  redisFailure,
  WEB_FILE_MAX_BYTES,
  type WebFile,
  type WebFileLink,
  type WebStoreKeys,
} from './web-store-model.js';

/** Uploaded files of the playground (charts, attachments): content-addressed hashes with a TTL. */

export interface WebFileStore {
  /** Store file bytes under a content hash; throws `PlatformError` `file_too_large` above the cap. */
  saveFile(file: {
    name: string;
    contentType: string;
    data: Uint8Array;
  }): Promise<WebFileLink & { id: string }>;
  getFile(fileId: string): Promise<WebFile | undefined>;
}

export function createWebFileStore(redis: Redis, keys: WebStoreKeys, fileTtlSeconds: number): WebFileStore {
  return {
    async saveFile(file) {
      if (file.data.byteLength > WEB_FILE_MAX_BYTES) {
        throw new PlatformError(
          'web',
          'file_too_large',
          `${file.name} is ${file.data.byteLength} bytes; the playground keeps at most ${WEB_FILE_MAX_BYTES}`,
          { retryable: false },
        );
      }
      // Content-addressed, so re-rendering a card with the same chart stores the bytes once.
      const id = createHash('sha256').update(file.data).digest('hex').slice(0, 32);
      try {
        await redis
          .multi()
          .hset(keys.file(id), {
            name: file.name,
            contentType: file.contentType,
            data: Buffer.from(file.data.buffer, file.data.byteOffset, file.data.byteLength),
          })
          // Saved again (the same chart re-rendered), the file lives on from now.
          .expire(keys.file(id), fileTtlSeconds)
          .exec();
      } catch (error) {
        throw redisFailure('file save', error);
      }
      return { id, name: file.name, url: `/api/files/${id}` };
    },

    async getFile(fileId) {
      if (!/^[0-9a-f]{32}$/.test(fileId)) return undefined;
      const hash = await redis.hgetallBuffer(keys.file(fileId));
      const { name, contentType, data } = hash;
      if (name === undefined || contentType === undefined || data === undefined) return undefined;
      return { id: fileId, name: name.toString(), contentType: contentType.toString(), data };
    },
  };
}
