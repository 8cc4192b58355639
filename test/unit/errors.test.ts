import { describe, expect, it } from 'vitest';
import {
  LlmError,
  PlatformError,
  platformApiCode,
  RateLimitedError,
  RunError,
  ServiceError,
  ToolPolicyError,
} from '../../src/errors.js';

describe('error family', () => {
  it('has closed code unions the compiler checks', () => {
    // Each line below would compile if its class took any string as a code (tsc runs over test/).
    // @ts-expect-error not a RunErrorCode
    const run = new RunError('run_exploded', 'x');
    // @ts-expect-error not a ToolPolicyErrorCode
    const tool = new ToolPolicyError('nope', 'x');
    // @ts-expect-error not a ServiceErrorCode
    const service = new ServiceError('oops', 'x', { retryable: false });
    // @ts-expect-error a platform's own code must be marked as one
    const platform = new PlatformError('slack', 'channel_not_found', 'x', { retryable: false });
    expect([run.code, tool.code, service.code, platform.code]).toEqual([
      'run_exploded',
      'nope',
      'oops',
      'channel_not_found',
    ]);
    expect(
      new PlatformError('slack', platformApiCode('channel_not_found'), 'x', { retryable: false }).code,
    ).toBe('channel_not_found');
  });

  it('has one name for retryable', () => {
    expect(new RunError('run_not_found', 'x').retryable).toBe(false);
    expect(new ToolPolicyError('gpu_limit', 'x').retryable).toBe(false);
    expect(new LlmError('x', { retryable: true }).retryable).toBe(true);
    expect(new RateLimitedError('discord', 10).retryable).toBe(true);
    expect(new ServiceError('adapter_missing', 'x', { retryable: true })).toMatchObject({
      name: 'ServiceError',
      code: 'adapter_missing',
      retryable: true,
    });
  });
});
