/*
 * Builders for the raw Discord API v10 JSON the emulator serves: users, members, guilds, channels,
 * messages and interactions, shaped like the real payloads (snake_case, ISO timestamps, snowflake strings).
 */

const DISCORD_EPOCH = 1_420_070_400_000n;
let increment = 0n;

/** A fresh, increasing snowflake (time in the high bits, like Discord's). */
export function snowflake(): string {
  increment = (increment + 1n) & 0xfffn;
  return (((BigInt(Date.now()) - DISCORD_EPOCH) << 22n) | (1n << 17n) | increment).toString();
}

export type Json = Record<string, unknown>;

export interface EmulatorUser {
  id: string;
  username: string;
  global_name: string | null;
  discriminator: '0';
  avatar: null;
  bot?: boolean;
  /** Server nickname, used for the guild member. */
  nick?: string;
}

export function makeUser(
  username: string,
  options: { globalName?: string; nick?: string; bot?: boolean } = {},
) {
  const user: EmulatorUser = {
    id: snowflake(),
    username,
    global_name: options.globalName ?? null,
    discriminator: '0',
    avatar: null,
  };
  if (options.bot === true) user.bot = true;
  if (options.nick !== undefined) user.nick = options.nick;
  return user;
}

/** The public user object (without the emulator's `nick`). */
export function userJson(user: EmulatorUser): Json {
  const { nick: _nick, ...rest } = user;
  return { ...rest, public_flags: 0, flags: 0 };
}

export function memberJson(user: EmulatorUser, withUser = true): Json {
  return {
    ...(withUser ? { user: userJson(user) } : {}),
    nick: user.nick ?? null,
    roles: [],
    joined_at: new Date(0).toISOString(),
    deaf: false,
    mute: false,
    flags: 0,
    pending: false,
  };
}

export function textChannelJson(id: string, guildId: string, name: string): Json {
  return {
    id,
    type: 0,
    guild_id: guildId,
    name,
    position: 0,
    permission_overwrites: [],
    topic: null,
    nsfw: false,
    last_message_id: null,
    rate_limit_per_user: 0,
    parent_id: null,
    default_auto_archive_duration: 1440,
    flags: 0,
  };
}

export function threadChannelJson(
  id: string,
  guildId: string,
  parentId: string,
  name: string,
  ownerId: string,
) {
  const now = new Date().toISOString();
  return {
    id,
    type: 11,
    guild_id: guildId,
    parent_id: parentId,
    owner_id: ownerId,
    name,
    last_message_id: null,
    rate_limit_per_user: 0,
    message_count: 0,
    member_count: 1,
    total_message_sent: 0,
    flags: 0,
    thread_metadata: {
      archived: false,
      auto_archive_duration: 1440,
      archive_timestamp: now,
      locked: false,
      create_timestamp: now,
    },
  } satisfies Json;
}

export function dmChannelJson(id: string, recipient: EmulatorUser): Json {
  return { id, type: 1, last_message_id: null, recipients: [userJson(recipient)], flags: 0 };
}

export function guildJson(options: {
  id: string;
  name: string;
  ownerId: string;
  channels: Json[];
  members: EmulatorUser[];
}): Json {
  return {
    id: options.id,
    name: options.name,
    icon: null,
    splash: null,
    discovery_splash: null,
    owner_id: options.ownerId,
    afk_channel_id: null,
    afk_timeout: 300,
    verification_level: 0,
    default_message_notifications: 0,
    explicit_content_filter: 0,
    roles: [
      {
        id: options.id,
        name: '@everyone',
        permissions: '1071698660929',
        position: 0,
        color: 0,
        hoist: false,
        managed: false,
        mentionable: false,
        flags: 0,
      },
    ],
    emojis: [],
    stickers: [],
    features: [],
    mfa_level: 0,
    system_channel_id: null,
    system_channel_flags: 0,
    rules_channel_id: null,
    vanity_url_code: null,
    description: null,
    banner: null,
    premium_tier: 0,
    preferred_locale: 'en-US',
    public_updates_channel_id: null,
    nsfw_level: 0,
    premium_progress_bar_enabled: false,
    joined_at: new Date(0).toISOString(),
    large: false,
    unavailable: false,
    member_count: options.members.length,
    members: options.members.map((member) => memberJson(member)),
    channels: options.channels,
    threads: [],
    presences: [],
    voice_states: [],
    stage_instances: [],
    guild_scheduled_events: [],
    soundboard_sounds: [],
  };
}

export function messageJson(options: {
  id?: string;
  channelId: string;
  guildId?: string | undefined;
  author: EmulatorUser;
  content: string;
  mentions?: EmulatorUser[];
  embeds?: unknown[];
  components?: unknown[];
  attachments?: unknown[];
  flags?: number;
  type?: number;
  webhookId?: string;
  applicationId?: string;
  interactionId?: string;
}): Json {
  return {
    id: options.id ?? snowflake(),
    channel_id: options.channelId,
    ...(options.guildId === undefined ? {} : { guild_id: options.guildId }),
    author: userJson(options.author),
    content: options.content,
    timestamp: new Date().toISOString(),
    edited_timestamp: null,
    tts: false,
    mention_everyone: false,
    mentions: (options.mentions ?? []).map((user) => ({
      ...userJson(user),
      ...(options.guildId === undefined ? {} : { member: memberJson(user, false) }),
    })),
    mention_roles: [],
    attachments: options.attachments ?? [],
    embeds: options.embeds ?? [],
    components: options.components ?? [],
    pinned: false,
    type: options.type ?? 0,
    flags: options.flags ?? 0,
    ...(options.webhookId === undefined ? {} : { webhook_id: options.webhookId }),
    ...(options.applicationId === undefined ? {} : { application_id: options.applicationId }),
  };
}
