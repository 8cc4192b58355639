/**
 * How long `main` waits for a graceful stop (workers finish or hand back their jobs) before it exits
 * anyway. Container stop grace periods must be longer (docker-compose.yml).
 */
export const SHUTDOWN_FORCE_EXIT_MS = 30_000;
