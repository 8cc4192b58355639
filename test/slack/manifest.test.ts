import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

describe('slack/manifest.yaml', () => {
  const manifest = readFileSync(new URL('../../slack/manifest.yaml', import.meta.url), 'utf8');

  it('declares the scopes, events, command and Socket Mode the adapter relies on', () => {
    for (const scope of [
      'app_mentions:read',
      'chat:write',
      'channels:history',
      'groups:history',
      'im:history',
      'mpim:history',
      'users:read',
      'files:write',
      'commands',
    ]) {
      expect(manifest).toMatch(new RegExp(`^\\s+- ${scope}$`, 'm'));
    }
    for (const event of [
      'app_mention',
      'app_home_opened',
      'message.channels',
      'message.groups',
      'message.im',
      'message.mpim',
    ]) {
      expect(manifest).toMatch(new RegExp(`^\\s+- ${event.replace('.', '\\.')}$`, 'm'));
    }
    expect(manifest).toMatch(/command: \/shepherd/);
    // `/shepherd` shows how to use it, and the Home tab the App Home publishes into is on.
    expect(manifest).toMatch(/usage_hint: ".*help.*status <run>.*stop <run>.*"/);
    expect(manifest).toMatch(/home_tab_enabled: true/);
    expect(manifest).toMatch(/socket_mode_enabled: true/);
    expect(manifest).toMatch(/interactivity:\n\s+is_enabled: true/);
    expect(manifest).not.toMatch(/\t/);
    // Issue 26 §5: Shepherd never opens a DM (conversations.open), so it does not ask for im:write.
    expect(manifest).not.toMatch(/im:write/);
  });
});
