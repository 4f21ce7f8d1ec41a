# Multi-stage build of the gateway (not exercised by CI: no Docker engine runs there).
FROM node:24-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm install --no-audit --no-fund
COPY tsconfig.json nest-cli.json .swcrc ./
COPY src ./src
COPY console ./console
COPY scripts/build-console.js ./scripts/
RUN npx nest build && node scripts/build-console.js && npm prune --omit=dev

FROM node:24-slim
ENV NODE_ENV=production HOST=0.0.0.0 PORT=8080 GATEWAY_DATA_DIR=/data GATEWAY_CONFIG=/app/config/gateway.yaml
# glibc's malloc: see docs/architecture.md "Memory" (what npm start sets too).
ENV MALLOC_MMAP_THRESHOLD_=131072
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/console/dist ./console/dist
COPY package.json ./
COPY config ./config
RUN mkdir -p /data && chown node:node /data
USER node
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD node -e "require('http').get('http://127.0.0.1:'+(process.env.PORT||8080)+'/health',r=>process.exit(r.statusCode===200?0:1)).on('error',()=>process.exit(1))"
ENTRYPOINT ["node", "dist/cli/main.js"]
CMD ["serve"]
