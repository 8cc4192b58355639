import { main } from './cli.js';

// The CLI is the one other entry point besides src/app/main.ts allowed to read process.env.
main(process.argv.slice(2), process.env).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(
      `shepherd: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exit(1);
  },
);
