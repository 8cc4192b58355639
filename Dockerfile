# Shepherd: one image for the bot (adapters) and the workers (agent turns, monitor, runs).
FROM node:20-bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends python3 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY . .
ENV SHEPHERD_HOST=0.0.0.0 SHEPHERD_DATA_DIR=/data
VOLUME ["/data"]
EXPOSE 3000
CMD ["npm", "start"]
