// Step through a decode in the browser (ui/step_player.py). One module, two roles, chosen by data.role:
//   "player": the step controls, the token strips and the step's sentence; it owns the step, redraws its
//             charts at once on a click or a key, then tells the server (the trigger "step", 1-based: an
//             event, so a move to the step the server last heard of still reaches it).
//   "chart":  one plotly chart with a figure for every step: it shows its player's step, keeping the steps it
//             has drawn and drawing the neighbours in idle time; the toolbar camera saves the step shown.
//             A chart "alone" (data.alone) has one figure and no player: every other chart of the app.
// Players and charts meet on a channel; `version` names the decode they show, so a chart never draws a step
// of another decode. Streamlit calls this function again whenever the element's data arrives anew (every
// script run): state lives on the parent element, and the same data changes nothing. Streamlit may also call
// the cleanup a call returns while the element is still shown (a call overtaken by newer data): listeners
// therefore stay while the element is in the page, and go once it has left it.

const SHOWN = (window.__apStepPlayers ??= {});  // channel -> {version, step}: what each player shows now
const EVENT = "ap-step-player";
const SERVER_DELAY_MS = 80;  // a burst of clicks or keys tells the server once, after this pause

export default function (component) {
  // the data arrive as the bytes of one JSON text (ui/step_player.py), read once however often they arrive
  const state = (component.parentElement.__apStepPlayer ??= {});
  const text = new TextDecoder().decode(component.data);
  if (state.text !== text) {
    state.text = text;
    state.read = JSON.parse(text);
  }
  const read = { ...component, data: state.read };
  return state.read.role === "player" ? player(read, state) : chart(read, state);
}

// ---------------------------------------------------------------- player

function player({ data, parentElement, setTriggerValue }, state) {
  if (!state.root) build(parentElement, state);
  state.data = data;
  state.send = setTriggerValue;
  if (state.version !== data.version) {  // a new decode (or first mount): start where the server says
    clearTimeout(state.timer);  // a step of the decode before is no news for this one
    state.version = data.version;
    state.step = null;
    state.root.querySelector("input").max = String(data.steps.length);
    go(state, data.start, false);
  }
  if (!state.keys) {
    state.keys = (event) => onKey(state, event);
    document.addEventListener("keydown", state.keys);
  }
  return () => { if (!state.root.isConnected) stopKeys(state); };
}

function stopKeys(state) {
  document.removeEventListener("keydown", state.keys);
  state.keys = null;
}

const ICONS = {  // 24 x 24 outlines: |<  <  >  >|
  first: "M7 6v12M17 6l-6 6 6 6",
  prev: "M15 6l-6 6 6 6",
  next: "M9 6l6 6-6 6",
  last: "M17 6v12M7 6l6 6-6 6",
};
function button(name) {  // its title comes with the data, in the reader's language (show)
  const b = document.createElement("button");
  b.type = "button";
  b.className = "ap-step-button";
  b.dataset.go = name;
  b.innerHTML = `<svg viewBox="0 0 24 24" width="20" height="20" fill="none" stroke="currentColor"
    stroke-width="2.2" stroke-linecap="round" stroke-linejoin="round"><path d="${ICONS[name]}"/></svg>`;
  return b;
}

function build(parentElement, state) {
  const root = document.createElement("div");
  root.className = "ap-player";
  root.dataset.apPlayer = "";
  const controls = document.createElement("div");
  controls.className = "ap-controls";
  const slider = document.createElement("label");
  slider.className = "ap-slider";
  slider.innerHTML = '<span class="ap-slider-label"></span><input type="range" min="1" step="1">';
  controls.append(button("first"), button("prev"), slider, button("next"), button("last"));
  const strips = document.createElement("div");
  strips.className = "ap-strips";
  const caption = document.createElement("div");
  caption.className = "ap-caption";
  const sentence = document.createElement("div");
  sentence.className = "ap-sentence";
  root.append(controls, strips, caption, sentence);
  parentElement.appendChild(root);
  state.root = root;

  const target = { first: () => 0, prev: () => state.step - 1, next: () => state.step + 1,
                   last: () => state.data.steps.length - 1 };
  controls.addEventListener("click", (event) => {
    const b = event.target.closest("button[data-go]");
    if (b) go(state, target[b.dataset.go](), true);
  });
  const range = slider.querySelector("input");
  range.addEventListener("input", () => go(state, Number(range.value) - 1, true));
}

function onKey(state, event) {
  // ← and → anywhere on the page but in a widget that uses them; Home and End within the player only (elsewhere
  // they scroll the page)
  if (event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey) return;
  if (!state.root.isConnected) return stopKeys(state);  // its page has gone
  if (!state.root.offsetParent) return;  // hidden
  const focus = document.activeElement;
  const inside = state.root.contains(focus);
  const busy = focus && (focus.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(focus.tagName) ||
                         focus.getAttribute("role") === "slider");
  if (busy && !inside) return;  // the keys belong to that widget
  const last = state.data.steps.length - 1;
  const moves = { ArrowLeft: state.step - 1, ArrowRight: state.step + 1, ...(inside ? { Home: 0, End: last } : {}) };
  if (!(event.key in moves)) return;
  event.preventDefault();
  go(state, Math.min(Math.max(moves[event.key], 0), last), true);
}

function go(state, step, fromUser) {
  const steps = state.data.steps;
  if (step < 0 || step >= steps.length || step === state.step) return;
  state.step = step;
  show(state);
  SHOWN[state.data.channel] = { version: state.version, step };
  window.dispatchEvent(new CustomEvent(EVENT, { detail: { channel: state.data.channel, version: state.version,
                                                          step } }));
  if (fromUser) tellServer(state);
}

function tellServer(state) {
  // after the charts are painted (the next frame), and once for a burst of moves
  clearTimeout(state.timer);
  state.timer = setTimeout(() => state.send("step", state.step + 1), SERVER_DELAY_MS);
}

function show(state) {
  const { data, step, root } = state;
  const n = data.steps.length;
  const range = root.querySelector("input");
  range.value = String(step + 1);
  range.disabled = n < 2;
  root.querySelector(".ap-slider-label").textContent =
    data.texts.step.replace("{step}", String(step + 1)).replace("{steps}", String(n));
  for (const b of root.querySelectorAll("button[data-go]")) {
    b.disabled = (b.dataset.go === "first" || b.dataset.go === "prev") ? step === 0 : step === n - 1;
    b.title = data.texts[b.dataset.go];
    b.setAttribute("aria-label", data.texts[b.dataset.go]);
  }
  root.dataset.step = String(step + 1);
  root.querySelector(".ap-strips").replaceChildren(
    strip(data.labels[0], data.source.map((chip) => [chip, "plain"])),
    strip(data.labels[1], [[data.start_chip, "plain"],
                                ...data.steps.map((s, i) => [s.chip, i < step ? "plain" : i === step ? "chosen" : "future"])]),
  );
  root.querySelector(".ap-caption").innerHTML = data.steps[step].caption;  // built and escaped by the server
  root.querySelector(".ap-sentence").innerHTML = data.steps[step].sentence;
}

function strip(label, chips) {
  const row = document.createElement("div");
  row.className = "ap-strip";
  const name = document.createElement("span");
  name.className = "ap-strip-label";
  name.textContent = label;
  row.appendChild(name);
  for (const [chip, style] of chips) {
    const span = document.createElement("span");
    span.className = `ap-chip ap-chip-${style}${chip.forced ? " ap-chip-forced" : ""}`;
    span.textContent = (chip.forced ? "⚑ " : "") + chip.text;
    span.title = chip.tip + (style === "chosen" ? ": chosen now" : "");
    row.appendChild(span);
  }
  return row;
}

// ---------------------------------------------------------------- chart
// A chart keeps the steps it has drawn, one plotly graph each (at most KEEP), shows its player's step and parks the
// others (display: none); whenever the browser is idle it draws the steps next to the one shown, offstage. A step
// click then swaps graphs: plotly.js replots a chart from scratch whenever its data change (Plotly.react included),
// ~45 ms a chart in a browser slowed 2.5x (docs/MEASUREMENTS.md), and a click no longer waits for that.

const PLOTLY_HEIGHT = 450;  // plotly.js's height for a figure that sets none
const KEEP = 16;  // graphs a chart keeps: the steps farthest from the one shown go first
const STAGE = "position: fixed; left: -100000px; top: 0; visibility: hidden;";  // where idle-time drawing happens

function chart({ data, parentElement, setTriggerValue }, state) {
  state.send = setTriggerValue;
  if (!state.div) {
    state.div = document.createElement("div");
    state.div.className = "ap-chart";
    if (data.alone) state.div.dataset.apFigure = data.kind;  // [data-ap-chart]: a player's charts only
    else state.div.dataset.apChart = data.kind;
    parentElement.appendChild(state.div);
    state.graphs = new Map();  // step -> its graph
    if (!data.alone) {  // a player's chart follows its player's steps (a live chart has no player)
      state.follow = (event) => {
        if (!state.div.isConnected) return stop(state);
        const { channel, version, step } = event.detail;
        if (channel === state.data.channel && version === state.data.version) draw(state, step);
      };
      window.addEventListener(EVENT, state.follow);
    }
    state.resize = new ResizeObserver(() => fit(state.graphs.get(state.drawn), state));
    state.resize.observe(parentElement);
  }
  if (state.figuresId !== data.figures_id) forget(state);  // new figures or toolbar: draw them anew
  state.figuresId = data.figures_id;
  const renewed = state.figureId !== data.figure_id;  // a live chart's one figure changed
  state.figureId = data.figure_id;
  state.data = data;
  // the figure's height held before plotly.js draws it, so what follows on the page never moves when it does
  state.div.style.minHeight = `${data.figures[0]?.layout?.height ?? PLOTLY_HEIGHT}px`;
  const shown = SHOWN[data.channel];
  if (data.alone) {  // a live chart (ui/step_player.live_chart): no player, its one figure redrawn in place
    if (renewed && state.drawn === 0) renew(state);
    else draw(state, 0);
  } else if (shown && shown.version === data.version) {
    draw(state, shown.step);
  }
  return () => { if (!state.div.isConnected) stop(state); };
}

function renew(state) {
  // A live chart's new figure, into the graph it shows: Plotly.react keeps the graph's elements and toolbar
  const graph = state.graphs.get(0);
  state.div.dataset.apStep = "";
  graph.drawn = window.Plotly.react(graph, ...figure(state, 0), state.config);
  graph.drawn.then(() => { if (state.graphs.get(0) === graph) state.div.dataset.apStep = "1"; });
}

function forget(state) {
  state.cancelIdle?.();
  for (const graph of state.graphs.values()) { window.Plotly?.purge(graph); graph.remove(); }
  state.graphs.clear();
  state.drawn = undefined;
  state.config = null;
}

function stop(state) {
  window.removeEventListener(EVENT, state.follow);
  state.resize.disconnect();
  forget(state);
}

function draw(state, step) {
  if (state.drawn === step) return;
  if (!window.Plotly) {  // the chart code is still loading: try again shortly
    loadChartCode(state.data.plotly);
    clearTimeout(state.retry);
    state.waited = (state.waited ?? 0) + 1;
    if (state.waited === 200) state.div.textContent = state.data.waiting;
    state.retry = setTimeout(() => draw(state, step), 50);
    return;
  }
  if (state.waited) {  // before the first drawing only: clear the note
    state.div.textContent = "";
    state.waited = 0;
  }
  const before = state.graphs.get(state.drawn);
  state.drawn = step;
  state.div.dataset.apStep = "";
  let graph = state.graphs.get(step);
  if (graph) {
    if (graph.parentElement !== state.div) state.div.appendChild(graph);  // still offstage: it finishes in place
    reveal(graph);
  } else if (before) {
    graph = redraw(state, before, step);
  } else {
    graph = plot(state, step, state.div);
  }
  if (before && before !== graph) park(before);
  fit(graph, state);
  graph.drawn.then(() => { if (state.drawn === step) state.div.dataset.apStep = String(step + 1); });
  keep(state);
  drawNearby(state);
}

function loadChartCode(path) {
  // ui/preload.py's element asks for it first; a page that sent none, here (`path`: from the entry module)
  const entry = document.querySelector('script[type=module][src*="static/js/"]');
  if (entry) window.apPlotly ??= import(new URL(path, entry.src).href).catch(() => {});
}

function figure(state, step) {
  // step's figure as plotly.js draws it here: the app's chart look, the column's width
  const { data, layout } = state.data.figures[step];
  const look = { ...layout, template: state.data.template, autosize: true };
  if (look.title?.text) look.title = { ...look.title, text: `<b>${look.title.text}</b>` };  // as Streamlit sets them
  delete look.width;  // the column's width, as st.plotly_chart's width="stretch"
  return [data, look];
}

function plot(state, step, where) {
  // A new graph of `step` in `where`: the chart itself (shown) or the stage (hidden, as wide as the chart)
  const graph = document.createElement("div");
  graph.className = "ap-graph";
  graph.dataset.step = String(step + 1);
  if (where === state.div) graph.dataset.shown = "";
  where.appendChild(graph);
  state.graphs.set(step, graph);
  state.config ??= toolbar(state);
  graph.drawn = window.Plotly.newPlot(graph, ...figure(state, step), state.config);
  if (state.data.clickable) graph.drawn.then(() => listen(state, graph));
  return graph;
}

function listen(state, graph) {
  // A click on a point of the figure's click layer (the trace whose points have one number: a heatmap's have
  // two) tells the server its index; a double click, nothing picked. Plotly's plotly_doubleclick times the two
  // clicks as it handles them, late on a busy machine, and may or may not report the second as a click too; the
  // browser counts the clicks by their own times (`detail`): either says it.
  graph.on("plotly_click", (event) => {
    const point = event.points.find((p) => typeof p.pointIndex === "number");
    const clicks = event.event?.detail ?? 1;
    if (point && clicks <= 2) state.send("click", clicks === 1 ? point.pointIndex : -1);
  });
  graph.on("plotly_doubleclick", () => state.send("click", -1));
}

function redraw(state, graph, step) {
  // The graph shown, drawn again for `step` (a step none drew ahead): Plotly.react into the same elements costs
  // less than a new graph; the step it showed is no longer kept.
  state.graphs.delete(Number(graph.dataset.step) - 1);
  state.graphs.set(step, graph);
  graph.dataset.step = String(step + 1);
  graph.drawn = window.Plotly.react(graph, ...figure(state, step), state.config);
  return graph;
}

function reveal(graph) {
  delete graph.dataset.parked;
  graph.dataset.shown = "";
}

function park(graph) {
  delete graph.dataset.shown;
  graph.dataset.parked = "";
}

function fit(graph, state) {
  // a graph drawn or parked at another width than the chart's now is resized once shown
  if (graph?._fullLayout && graph.dataset.shown !== undefined &&
      Math.abs(graph._fullLayout.width - state.div.clientWidth) > 1) window.Plotly.Plots.resize(graph);
}

function keep(state) {
  // drop the graphs farthest from the step shown beyond KEEP
  const far = [...state.graphs.keys()].sort((a, b) => Math.abs(b - state.drawn) - Math.abs(a - state.drawn));
  for (const step of far.slice(0, Math.max(0, state.graphs.size - KEEP))) {
    const graph = state.graphs.get(step);
    window.Plotly.purge(graph);
    graph.remove();
    state.graphs.delete(step);
  }
}

function drawNearby(state) {
  // the next step, then the one before, one graph per idle moment (a click or key is never kept waiting)
  state.cancelIdle?.();
  const wanted = [state.drawn + 1, state.drawn - 1].filter(
    (step) => step >= 0 && step < state.data.figures.length && !state.graphs.has(step));
  if (!wanted.length) return;
  const idle = window.requestIdleCallback ?? ((then) => setTimeout(then, 100));
  const cancel = window.cancelIdleCallback ?? clearTimeout;
  const handle = idle(() => {
    state.cancelIdle = null;
    if (!state.div.isConnected || !state.div.clientWidth) return;  // gone, or hidden (nothing to size it by)
    const stage = document.createElement("div");
    stage.style.cssText = `${STAGE} width: ${state.div.clientWidth}px;`;
    document.body.appendChild(stage);
    const step = wanted[0];
    const graph = plot(state, step, stage);
    graph.drawn.finally(() => {
      const kept = state.graphs.get(step) === graph;  // not forgotten meanwhile (new figures)
      if (kept && graph.parentElement === stage) { park(graph); state.div.appendChild(graph); }
      stage.remove();
      if (kept) { keep(state); drawNearby(state); }
    });
  });
  state.cancelIdle = () => cancel(handle);
}

function toolbar(state) {
  // The camera saves a graph under its step's file name: one button of ours instead of plotly's, the same config
  // for every graph of the chart (Plotly.react would draw a graph from scratch for a new one). Full screen shows
  // the chart alone, as large as the screen.
  const { format, scale, left_out } = state.data.config;
  return {
    displaylogo: false, responsive: true,
    modeBarButtonsToRemove: ["toImage", ...left_out],
    modeBarButtonsToAdd: [{
      name: "download", title: state.data.texts.download, icon: window.Plotly.Icons.camera,
      click: (gd) => window.Plotly.downloadImage(gd, {
        format, scale, filename: state.data.filenames[Number(gd.dataset.step) - 1],
        width: gd._fullLayout.width, height: gd._fullLayout.height,
      }),
    }, {
      name: "fullscreen", title: state.data.texts.fullscreen, icon: FULLSCREEN_ICON,
      click: () => fullscreen(state),
    }],
  };
}

const FULLSCREEN_ICON = { width: 24, height: 24, path: "M3 3h7v2H5v5H3zM14 3h7v7h-2V5h-5zM3 14h2v5h5v2H3zM19 14h2v7h-7v-2h5z" };

function fullscreen(state) {
  // The chart's element fills the screen; its graph takes the screen's height while it does, its own after.
  if (document.fullscreenElement) return document.exitFullscreen();
  const div = state.div;
  const sized = (height) => {
    const graph = state.graphs.get(state.drawn);
    if (graph?._fullLayout) window.Plotly.relayout(graph, { height }).then(() => window.Plotly.Plots.resize(graph));
  };
  const left = () => {
    if (document.fullscreenElement === div) return;
    document.removeEventListener("fullscreenchange", left);
    sized(state.data.figures[state.drawn]?.layout?.height ?? null);
  };
  div.requestFullscreen?.().then(() => {
    document.addEventListener("fullscreenchange", left);
    sized(Math.round(window.innerHeight * 0.92));
  }).catch(() => {});
}
