# Shepherd: one image for the bot (adapters) and the workers (agent turns, monitor, runs).
# Build stage: the TypeScript compiler and dev dependencies stay here.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build

FROM node:24-bookworm-slim
# python3 runs training scripts and the launcher; tini is PID 1 (signals forwarded, zombies reaped);
# DejaVu gives the in-process chart renderer fonts, so axes and titles have text.
RUN apt-get update \
  && apt-get install -y --no-install-recommends python3 tini fonts-dejavu-core fontconfig \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
# typescript is valibot's optional peer (Bull Board's validation; types only) and npm keeps it because it is
# also a dev dependency here: nothing compiled needs it (23 MB).
RUN npm ci --omit=dev --no-audit --no-fund && rm -rf node_modules/typescript && npm cache clean --force
# Compiled JavaScript only (with the Python helper and the prompts the build copies next to it).
COPY --from=build /app/dist/src ./dist/src
COPY --from=build /app/dist/prompts ./dist/prompts
# The `shepherd` operator command (`docker compose exec bot node bin/shepherd.js doctor`).
COPY bin ./bin
# The example scripts, so the README's first run works from the image alone (SHEPHERD_WORKSPACE=/app).
COPY examples ./examples
# The HTTP server binds every interface inside the container, so the playground needs
# SHEPHERD_PLAYGROUND_TOKEN (or SHEPHERD_PLAYGROUND=off); start-up says so when it is missing.
ENV SHEPHERD_HOST=0.0.0.0 SHEPHERD_DATA_DIR=/data
RUN mkdir -p /data && chown node:node /data
# Never root: training scripts run as this user too.
USER node
VOLUME ["/data"]
EXPOSE 3000
HEALTHCHECK --interval=30s --timeout=10s --start-period=40s --retries=3 CMD ["node", "dist/src/app/healthcheck.js"]
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "dist/src/app/main.js"]
