/**
 * Episodes: an alert kind fires once when its condition starts and stays quiet until the condition has
 * been false for `recoveryNeeded` consecutive observations; only then can it fire again. The state is plain
 * data persisted with the rest of the monitor state, so a restart neither re-alerts nor forgets.
 */

interface EpisodeState {
  active: boolean;
  /** Consecutive observations without the condition while active. */
  calm: number;
  /** Episodes fired so far under this key (used in incident ids). */
  fired: number;
}

export type EpisodeBook = Record<string, EpisodeState>;

/**
 * Record one observation of the condition under `key`. Returns true exactly when a new episode begins,
 * i.e. when the caller should raise the incident.
 */
export function observeEpisode(
  book: EpisodeBook,
  key: string,
  condition: boolean,
  recoveryNeeded = 1,
): boolean {
  let state = book[key];
  if (state === undefined) {
    if (!condition) return false;
    state = { active: false, calm: 0, fired: 0 };
    book[key] = state;
  }
  if (condition) {
    state.calm = 0;
    if (state.active) return false;
    state.active = true;
    state.fired++;
    return true;
  }
  if (state.active) {
    state.calm++;
    if (state.calm >= recoveryNeeded) {
      state.active = false;
      state.calm = 0;
    }
  }
  return false;
}

export function isEpisodeActive(book: EpisodeBook, key: string): boolean {
  return book[key]?.active === true;
}

export function episodeCount(book: EpisodeBook, key: string): number {
  return book[key]?.fired ?? 0;
}

/**
 * A new launch (e.g. after an approved fix) starts with every detector armed again, so a problem that
 * persists alerts again. Launch-keyed episodes (`crash:3`, `finished:3`) are left alone.
 */
export function rearmEpisodes(book: EpisodeBook): void {
  for (const [key, state] of Object.entries(book)) {
    if (/:\d+$/.test(key)) continue;
    state.active = false;
    state.calm = 0;
  }
}
