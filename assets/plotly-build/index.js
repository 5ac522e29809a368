// The chart code of the app: plotly.js's core (scatter, axes, shapes, annotations, the toolbar) and the two other
// trace types the app draws. A chart of any other type would stay blank: tests/app/test_pages_every_model.py reads
// the types registered here back out of the build.
'use strict';

var Plotly = require('plotly.js/lib/core');

Plotly.register([require('plotly.js/lib/bar'), require('plotly.js/lib/heatmap')]);

module.exports = Plotly;
