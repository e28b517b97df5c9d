// Builds the UI into the Python package so neither installing nor running Drupe needs Node.
import { fileURLToPath } from "node:url";
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

const outDir = fileURLToPath(new URL("../src/drupe/api/static", import.meta.url));

export default defineConfig({
  plugins: [react()],
  // Relative asset URLs: the page works wherever the gateway mounts index.html.
  base: "./",
  build: {
    outDir,
    emptyOutDir: true,
    sourcemap: false,
    // The initial chunk is ~700 kB (KaTeX and highlight.js are lazy chunks): warn if it grows back.
    chunkSizeWarningLimit: 750,
  },
  server: {
    // `npm run dev` proxies the API to a local `drupe serve` (default port 8000).
    proxy: { "/api": { target: process.env.DRUPE_URL ?? "http://127.0.0.1:8000", changeOrigin: false } },
  },
  test: {
    environment: "node",
    include: ["src/**/*.test.ts"],
  },
});
