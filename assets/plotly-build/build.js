// `npm ci && npm run build`: writes ../plotly/plotly-app.min.js with plotly.js's own esbuild settings for its dist bundles
// (its esbuild-config.js, minified), as one plain script that sets window.Plotly. plotly.js's dist files wrap the
// same code in a UMD function, which Chromium parses twice: importing plotly-cartesian.min.js took ~0.55 s of a
// page's main thread here, this file ~0.22 s (docs/MEASUREMENTS.md).
const esbuild = require('esbuild');
const { environmentPlugin } = require('esbuild-plugin-environment');
const InlineCSSPlugin = require('esbuild-plugin-inline-css');
const { version } = require('plotly.js/package.json');

esbuild.build({
  entryPoints: ['./index.js'],
  outfile: '../plotly/plotly-app.min.js',
  format: 'iife',
  globalName: 'Plotly',
  bundle: true,
  minify: true,
  plugins: [InlineCSSPlugin(), environmentPlugin({ NODE_DEBUG: false })],
  alias: { regl: '@plotly/regl', stream: 'stream-browserify' },
  define: { global: 'window', 'define.amd': 'false' },
  target: 'es2016',
  banner: { js: `/**\n* plotly.js (scatter, bar, heatmap - minified) v${version}\n* Copyright 2012-2026, Plotly, Inc.\n`
    + '* All rights reserved.\n* Licensed under the MIT license\n*/' },
  footer: { js: 'window.Plotly = Plotly;' },
  logLevel: 'info',
}).catch(() => process.exit(1));
