// The baseline app of bench/bench_ingest.py: it receives deliveries and does nothing.
/** @param {import('probot').Probot} app */
export default (app) => {
  app.on("issues.labeled", async () => {});
  app.on("ping", async () => {});
};
