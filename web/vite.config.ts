// Vite build for the portal. The output (index.html + hashed /assets/*) is embedded into the tessera
// binary by cmake/embed_web.cmake; CMake passes --outDir into its build folder.
import { defineConfig } from 'vite';

export default defineConfig({
  base: '/',
  build: {
    assetsDir: 'assets',
    sourcemap: false,
    target: 'es2020',
    chunkSizeWarningLimit: 400,
    modulePreload: { polyfill: false },
  },
});
