import type { Config } from '../config/config.js';
import { type CheckOutcome, errorText, outcome, PROBE_TIMEOUT_MS } from './doctor-types.js';

type Fetch = typeof fetch;

async function getJson(
  fetcher: Fetch,
  url: string,
  init: RequestInit,
): Promise<{ status: number; body: unknown; headers: Headers }> {
  const response = await fetcher(url, { ...init, signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
  const text = await response.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  return { status: response.status, body, headers: response.headers };
}

function trimSlash(url: string): string {
  return url.replace(/\/+$/, '');
}

/** The model endpoint answers a one-token request, and lists the configured model when it lists models. */
export async function checkLlm(llm: Config['llm'], fetcher: Fetch = fetch): Promise<CheckOutcome[]> {
  const base = trimSlash(llm.baseUrl);
  const anthropic = llm.provider === 'anthropic';
  const root = anthropic ? base.replace(/\/v1$/, '') : base;
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (anthropic) {
    headers['x-api-key'] = llm.apiKey ?? 'not-needed';
    headers['anthropic-version'] = '2023-06-01';
  } else if (llm.apiKey !== undefined) {
    headers.authorization = `Bearer ${llm.apiKey}`;
  }
  const results: CheckOutcome[] = [];
  try {
    const models = await getJson(fetcher, anthropic ? `${root}/v1/models` : `${base}/models`, { headers });
    const ids = Array.isArray((models.body as { data?: unknown })?.data)
      ? ((models.body as { data: Array<{ id?: unknown }> }).data.map((entry) => entry.id) as unknown[])
      : undefined;
    if (models.status === 200 && ids !== undefined) {
      results.push(
        ids.includes(llm.model)
          ? outcome('llm model', 'ok', `${llm.model} is listed`)
          : outcome(
              'llm model',
              'fail',
              `${llm.model} is not among the ${ids.length} models the endpoint lists`,
              `set SHEPHERD_LLM_MODEL to one of: ${ids.slice(0, 5).join(', ')}`,
            ),
      );
    }
  } catch {
    // Listing models is optional (some servers have no such route); the request below decides.
  }
  try {
    const body = anthropic
      ? { model: llm.model, max_tokens: 1, messages: [{ role: 'user', content: 'ping' }] }
      : { model: llm.model, max_tokens: 1, messages: [{ role: 'user', content: 'ping' }] };
    const url = anthropic ? `${root}/v1/messages` : `${base}/chat/completions`;
    const answer = await getJson(fetcher, url, { method: 'POST', headers, body: JSON.stringify(body) });
    if (answer.status >= 200 && answer.status < 300) {
      results.unshift(
        outcome('llm', 'ok', `${llm.provider} endpoint ${llm.baseUrl} answered (${llm.model})`),
      );
    } else {
      const message =
        typeof answer.body === 'object' && answer.body !== null
          ? JSON.stringify((answer.body as { error?: unknown }).error ?? answer.body).slice(0, 160)
          : String(answer.body).slice(0, 160);
      results.unshift(
        outcome(
          'llm',
          'fail',
          `${llm.baseUrl} answered HTTP ${answer.status}: ${message}`,
          answer.status === 401 || answer.status === 403
            ? 'check SHEPHERD_LLM_API_KEY'
            : 'check SHEPHERD_LLM_MODEL and SHEPHERD_LLM_BASE_URL',
        ),
      );
    }
  } catch (error) {
    results.unshift(
      outcome(
        'llm',
        'fail',
        `no answer from ${llm.baseUrl}: ${errorText(error)}`,
        'start the model server or fix SHEPHERD_LLM_BASE_URL',
      ),
    );
  }
  return results;
}

/** The bot scopes the app manifest asks for (`oauth_config.scopes.bot`). */
export function manifestBotScopes(manifestYaml: string): string[] {
  const lines = manifestYaml.split('\n');
  const scopes: string[] = [];
  let inBot = false;
  let botIndent = 0;
  for (const line of lines) {
    const indent = line.length - line.trimStart().length;
    const trimmed = line.trim();
    if (/^bot:\s*$/.test(trimmed)) {
      inBot = true;
      botIndent = indent;
      continue;
    }
    if (!inBot || trimmed === '' || trimmed.startsWith('#')) continue;
    if (indent <= botIndent) break;
    const item = /^-\s*([\w:.-]+)/.exec(trimmed)?.[1];
    if (item !== undefined) scopes.push(item);
  }
  return scopes;
}

/** A Slack Web API call the way Slack wants a form POST: the token as a bearer header. */
function slackPost(fetcher: Fetch, url: string, token: string) {
  return getJson(fetcher, url, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/x-www-form-urlencoded',
    },
  });
}

/** The scopes Slack reports as granted (`x-oauth-scopes`) against the manifest's. */
function slackScopesOutcome(granted: string | null, manifestScopes: string[]): CheckOutcome {
  if (granted === null) return outcome('slack scopes', 'warn', 'Slack did not report the granted scopes');
  const have = new Set(granted.split(',').map((scope) => scope.trim()));
  const missing = manifestScopes.filter((scope) => !have.has(scope));
  return missing.length === 0
    ? outcome('slack scopes', 'ok', `all ${manifestScopes.length} manifest scopes granted`)
    : outcome(
        'slack scopes',
        'fail',
        `missing scopes: ${missing.join(', ')}`,
        'add them under OAuth & Permissions (or re-create the app from slack/manifest.yaml) and reinstall',
      );
}

/** Socket Mode: the app-level token opens a connection; without one, HTTP mode needs the signing secret. */
async function checkSlackSocket(
  slack: Config['slack'],
  api: string,
  fetcher: Fetch,
): Promise<CheckOutcome | undefined> {
  if (slack.appToken === undefined) {
    return slack.signingSecret === undefined
      ? outcome(
          'slack socket',
          'fail',
          'neither SLACK_APP_TOKEN nor SLACK_SIGNING_SECRET is set',
          'set SLACK_APP_TOKEN for Socket Mode',
        )
      : undefined;
  }
  try {
    const open = await slackPost(fetcher, `${api}/apps.connections.open`, slack.appToken);
    const body = open.body as { ok?: boolean; error?: string };
    return body.ok === true
      ? outcome('slack socket', 'ok', 'apps.connections.open accepted the app token')
      : outcome(
          'slack socket',
          'fail',
          `the app-level token was refused: ${body.error ?? `HTTP ${open.status}`}`,
          'create an app-level token with connections:write (xapp-…) and set SLACK_APP_TOKEN',
        );
  } catch (error) {
    return outcome('slack socket', 'fail', `apps.connections.open failed: ${errorText(error)}`);
  }
}

/** `auth.test` with the bot token, its granted scopes against the manifest, and the Socket Mode token. */
export async function checkSlack(
  slack: Config['slack'],
  manifestScopes: string[],
  fetcher: Fetch = fetch,
): Promise<CheckOutcome[]> {
  if (slack.botToken === undefined) {
    return [outcome('slack', 'skip', 'SLACK_BOT_TOKEN is not set')];
  }
  const api = trimSlash(slack.apiUrl ?? 'https://slack.com/api');
  const results: CheckOutcome[] = [];
  try {
    const auth = await slackPost(fetcher, `${api}/auth.test`, slack.botToken);
    const body = auth.body as { ok?: boolean; error?: string; user?: string; team?: string };
    if (body.ok !== true) {
      return [
        outcome(
          'slack',
          'fail',
          `auth.test refused the bot token: ${body.error ?? `HTTP ${auth.status}`}`,
          'copy the Bot User OAuth Token (xoxb-…) from the app page into SLACK_BOT_TOKEN',
        ),
      ];
    }
    results.push(outcome('slack', 'ok', `auth.test: ${body.user ?? '?'} in ${body.team ?? '?'}`));
    results.push(slackScopesOutcome(auth.headers.get('x-oauth-scopes'), manifestScopes));
  } catch (error) {
    return [
      outcome(
        'slack',
        'fail',
        `cannot reach ${api}: ${errorText(error)}`,
        'check SLACK_API_URL or the network',
      ),
    ];
  }
  const socket = await checkSlackSocket(slack, api, fetcher);
  if (socket !== undefined) results.push(socket);
  return results;
}

/** Discord application flags for the Message Content intent (enabled, or limited for unverified bots). */
const MESSAGE_CONTENT_FLAGS = (1 << 18) | (1 << 19);

/** `/users/@me` with the token, and the application's Message Content intent. */
export async function checkDiscord(
  discord: Config['discord'],
  fetcher: Fetch = fetch,
): Promise<CheckOutcome[]> {
  if (discord.token === undefined) return [outcome('discord', 'skip', 'DISCORD_TOKEN is not set')];
  const api = trimSlash(discord.apiUrl ?? 'https://discord.com/api');
  const versioned = /\/v\d+$/.test(api) ? api : `${api}/v10`;
  const headers = { authorization: `Bot ${discord.token}` };
  try {
    const me = await getJson(fetcher, `${versioned}/users/@me`, { headers });
    if (me.status !== 200) {
      return [
        outcome(
          'discord',
          'fail',
          `/users/@me answered HTTP ${me.status}`,
          'reset the bot token on the Developer Portal (Bot page) and set DISCORD_TOKEN',
        ),
      ];
    }
    const user = me.body as { username?: string; id?: string };
    const results = [outcome('discord', 'ok', `logged in as ${user.username ?? '?'} (${user.id ?? '?'})`)];
    const application = await getJson(fetcher, `${versioned}/applications/@me`, { headers });
    const flags = Number((application.body as { flags?: unknown }).flags ?? 0);
    results.push(
      application.status === 200 && (flags & MESSAGE_CONTENT_FLAGS) !== 0
        ? outcome('discord intent', 'ok', 'Message Content intent enabled')
        : outcome(
            'discord intent',
            'fail',
            application.status === 200
              ? 'the Message Content intent is off: thread replies would arrive empty'
              : `/applications/@me answered HTTP ${application.status}`,
            'enable "Message Content Intent" on the Developer Portal (Bot page)',
          ),
    );
    return results;
  } catch (error) {
    return [outcome('discord', 'fail', `cannot reach ${versioned}: ${errorText(error)}`)];
  }
}
