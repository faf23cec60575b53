// Vite build for the portal. The output (index.html + hashed /assets/*) is embedded into the tessera
// binary by cmake/web_assets.cmake; CMake passes --outDir into its build folder. `npm run dev` serves
// the page with live reload and forwards the API to $TESSERA_SERVER (default http://127.0.0.1:8420).
import { defineConfig } from 'vite';

const server = process.env.TESSERA_SERVER ?? 'http://127.0.0.1:8420';

export default defineConfig({
  base: '/',
  build: {
    assetsDir: 'assets',
    sourcemap: false,
    target: 'es2020',
    chunkSizeWarningLimit: 400,
    modulePreload: { polyfill: false },
  },
  server: { proxy: { '/api': server, '/healthz': server } },
});
