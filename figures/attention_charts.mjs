// Attention charts drawn in the browser, from compact numbers (figures/browser.py): the grid of every layer x head
// and the one-head chart whose menu shows another head without the server. The figures are the ones
// figures/attention.py's attention_grid and attention_heads build (with Display.apply's font, number marks and
// colour scale): tests/test_browser_charts.py runs gridFigure and headsFigure in node and compares them.
// The default export is a Streamlit component (components v2, no iframe): app/attention_charts.py mounts it.

// Streamlit's own plotly look (its "streamlit" theme, light), the parts a heatmap uses: Streamlit applies it
// to every st.plotly_chart; a chart drawn here gets it from this template.
const FONT = '"Source Sans", sans-serif';
const GREY = "#808495";
const LINES = "#e6eaf1";
export const THEME = {
  font: { color: GREY, family: FONT, size: 12, weight: 400 },
  title: { font: { family: FONT, size: 16, color: "#2F2D2B" }, pad: { l: 4 }, xanchor: "left", x: 0 },
  paper_bgcolor: "#FFFFFF", plot_bgcolor: "#FFFFFF",
  coloraxis: { colorbar: { thickness: 16, xpad: 24, ticklabelposition: "outside", outlinecolor: "transparent",
                           outlinewidth: 8, len: 0.75, y: 0.5745, title: { font: { color: GREY, size: 14 } },
                           tickfont: { color: GREY, size: 12 } } },
  xaxis: { zerolinecolor: LINES, gridcolor: LINES, showgrid: false, tickfont: { color: GREY, size: 12 },
           tickcolor: LINES, title: { font: { color: GREY, size: 14 }, standoff: 20 }, zeroline: false,
           automargin: true },
  yaxis: { ticklabelposition: "outside", zerolinecolor: LINES, title: { font: { color: GREY, size: 14 }, standoff: 24 },
           tickcolor: LINES, tickfont: { color: GREY, size: 12 }, gridcolor: LINES, automargin: true },
  margin: { pad: 8, r: 0, l: 0 },
  hoverlabel: { bgcolor: "#FFFFFF", bordercolor: "#DCD8D4", font: { color: GREY, family: FONT, size: 12 } },
};

// base64 of little-endian uint16 -> the weights, float32 in [0, 1]
export function unpack(numbers) {
  const raw = atob(numbers.u16);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  const fixed = new Uint16Array(bytes.buffer);
  const values = new Float32Array(fixed.length);
  for (let i = 0; i < fixed.length; i++) values[i] = fixed[i] / 65535;
  return values;
}

// Numbers by name (app/attention_charts.py sends numbers once per browser, later only their name and shape): the
// last KEPT received, on the window (every chart of the page reads them). numbersFor(n) gives n's weights: n's own
// when it carries them (kept), else the kept ones of its name, or those of a chart of the same run that carries
// them and is drawn a moment later; after WAIT_MS without them, null (the server is told, and sends them again).
export const KEPT = 8;
const WAIT_MS = 3000;
const ASKED_MS = 60_000;                   // once asked for again

export function numbersFor(numbers, store = window, waitMs = WAIT_MS) {
  const kept = (store.__attentionNumbers ||= new Map());
  const waiting = (store.__attentionWaiting ||= new Map());
  if (numbers.u16) {
    const values = unpack(numbers);
    kept.delete(numbers.ref);
    kept.set(numbers.ref, values);
    while (kept.size > KEPT) kept.delete(kept.keys().next().value);
    for (const resolve of waiting.get(numbers.ref) || []) resolve(values);
    waiting.delete(numbers.ref);
    return Promise.resolve(values);
  }
  if (kept.has(numbers.ref)) {
    const values = kept.get(numbers.ref);
    kept.delete(numbers.ref);
    kept.set(numbers.ref, values);                         // the most recently used is kept longest
    return Promise.resolve(values);
  }
  return new Promise((resolve) => {
    waiting.set(numbers.ref, [...(waiting.get(numbers.ref) || []), resolve]);
    setTimeout(() => {
      const left = (waiting.get(numbers.ref) || []).filter((r) => r !== resolve);
      if (left.length) waiting.set(numbers.ref, left); else waiting.delete(numbers.ref);
      resolve(null);
    }, waitMs);
  });
}

// The (tq, tk) matrix of cell k (row-major over the leading axes) as rows of plain numbers.
function matrix(values, k, tq, tk) {
  const out = [];
  for (let r = 0; r < tq; r++) out.push(Array.from(values.subarray((k * tq + r) * tk, (k * tq + r + 1) * tk)));
  return out;
}

// What Display.apply sets: the font size, the language's number marks, the sequential scale of the colour axis.
function displayed(layout, d) {
  layout.font = { size: d.display.font };
  layout.separators = d.display.separators;
  layout.coloraxis.colorscale = d.display.colorscale;
  return layout;
}

function highlight(d, tk, refs) {
  const at = d.highlight;
  return refs.map(([x, y]) => Object.assign(
    { type: "rect", x0: -0.5, x1: tk - 0.5, y0: at - 0.5, y1: at + 0.5,
      line: { color: d.chosen_colour, width: x ? 1.5 : 3 } }, x ? { xref: x, yref: y } : {}));
}

const ref = (letter, k) => `${letter}${k > 1 ? k : ""}`;

// figures.attention.grid_layout: the axes and titles of an n_r x n_c grid of heatmaps.
export function gridLayout(nR, nC, rowNames, colNames, hSpacing = 0.012, vSpacing = 0.03) {
  const right = 0.98;
  const w = (right - hSpacing * (nC - 1)) / nC;
  const h = (1.0 - vSpacing * (nR - 1)) / nR;
  const layout = {};
  for (let i = 0; i < nR; i++) {
    const top = 1.0 - i * (h + vSpacing);
    for (let j = 0; j < nC; j++) {
      const k = i * nC + j + 1;
      const x0 = j * (w + hSpacing);
      layout[ref("xaxis", k)] = { anchor: ref("y", k), domain: [x0, x0 + w], showticklabels: false, showgrid: false,
                                  zeroline: false };
      layout[ref("yaxis", k)] = { anchor: ref("x", k), domain: [top - h, top], showticklabels: false, showgrid: false,
                                  zeroline: false, autorange: "reversed" };
    }
  }
  const title = { font: { size: 16 }, showarrow: false, xref: "paper", yref: "paper" };
  layout.annotations = [
    ...colNames.map((name, j) => ({ ...title, text: name, x: j * (w + hSpacing) + w / 2, y: 1.0, xanchor: "center",
                                    yanchor: "bottom" })),
    ...rowNames.map((name, i) => ({ ...title, text: name, x: right, y: 1.0 - i * (h + vSpacing) - h / 2,
                                    xanchor: "left", yanchor: "middle", textangle: 90 })),
  ];
  return layout;
}

// figures.attention_grid: every layer x head as a small heatmap, hover by position.
export function gridFigure(d, values) {
  const [nL, nH, tq, tk] = d.numbers.shape;
  const g = d.grid;
  const data = [];
  for (let i = 0; i < nL; i++) for (let j = 0; j < nH; j++) {
    const k = i * nH + j + 1;
    data.push({ type: "heatmap", z: matrix(values, k - 1, tq, tk), coloraxis: "coloraxis",
                hovertemplate: `${g.layers[i]}, ${g.heads[j]}` + g.hover, xaxis: ref("x", k), yaxis: ref("y", k) });
  }
  const layout = gridLayout(nL, nH, g.layers, g.heads);
  if (d.highlight !== null && d.highlight !== undefined) {
    layout.shapes = highlight(d, tk, data.map((t) => [t.xaxis, t.yaxis]));
  }
  Object.assign(layout, {
    title: { text: g.title }, meta: "sequential",
    coloraxis: { colorscale: d.display.colorscale, cmin: 0, cmax: 1, colorbar: { thickness: 12 } },
    height: nH > 4 ? 110 + 105 * nL : 110 + 160 * nL, margin: { l: 10, r: 30, t: 70, b: 10 },
  });
  return { data, layout: displayed(layout, d) };
}

// figures.attention_heads: every head as one heatmap, the chosen one shown, a menu that shows another.
export function headsFigure(d, values) {
  const [nL, nH, tq, tk] = d.numbers.shape;
  const s = d.single;
  const y = d.rows.map((t, i) => `${i}: ${t}`);
  const x = d.cols.map((t, j) => `${j}: ${t}`);
  const chosen = d.layer * nH + d.head;
  const n = nL * nH;
  const data = d.names.map((name, k) => ({
    type: "heatmap", z: matrix(values, k, tq, tk), x, y, coloraxis: "coloraxis", visible: k === chosen, name,
    hovertemplate: `${s.hover}<extra>${name}</extra>` }));
  const buttons = d.names.map((name, k) => ({
    label: name, method: "update",
    args: [{ visible: Array.from({ length: n }, (_, m) => m === k) }, { "title.text": name }] }));
  const size = Math.max(tq, tk);
  const layout = {
    title: { text: d.names[chosen] }, meta: "sequential",
    xaxis: { type: "category", tickmode: "array", tickvals: x, ticktext: d.cols, title: { text: s.col_title },
             tickangle: -60, showgrid: false },
    yaxis: { type: "category", tickmode: "array", tickvals: y, ticktext: d.rows, title: { text: s.row_title },
             autorange: "reversed", showgrid: false },
    coloraxis: { colorscale: d.display.colorscale, cmin: 0, cmax: 1, colorbar: { thickness: 12 } },
    updatemenus: [{ type: "dropdown", active: chosen, buttons, x: 1.0, xanchor: "right", y: 1.02, yanchor: "bottom",
                    showactive: true, pad: { t: 0, b: 0 } }],
    modebar: { orientation: "v" },
    height: Math.min(900, 180 + 26 * size), margin: d.margin,
  };
  if (d.highlight !== null && d.highlight !== undefined) layout.shapes = highlight(d, tk, [[null, null]]);
  return { data, layout: displayed(layout, d) };
}

// As the page shows it: Streamlit's theme under it, the title in bold (as Streamlit writes every chart's title).
function themed(fig, width) {
  const layout = { ...fig.layout, template: { layout: THEME }, width,
                   title: { ...fig.layout.title, text: `<b>${fig.layout.title.text}</b>` } };
  return { data: fig.data, layout };
}

// plotly.js: Streamlit's own copy (its PlotlyChart module sets window.Plotly when it loads; `chunk` is that file's
// name beside Streamlit's index script, app/attention_charts.py finds it), loaded once per page.
function plotly(chunk) {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (!window.__attentionPlotly) {
    const index = document.querySelector('script[src*="static/js/index."]');
    window.__attentionPlotly = (chunk && index ? import(new URL(chunk, index.src).href) : Promise.resolve())
      .then(() => window.Plotly || waitFor(() => window.Plotly, 20_000));
  }
  return window.__attentionPlotly;
}

function waitFor(get, ms) {
  return new Promise((resolve, reject) => {
    const start = Date.now();
    const look = () => (get() ? resolve(get()) : Date.now() - start > ms ? reject(new Error("plotly.js not found"))
                                                                         : setTimeout(look, 50));
    look();
  });
}

// ---- the chosen head, in the browser --------------------------------------------------------------------------
// The layer and head pickers (data.chart "pickers") and the one-head chart's menu choose a head at once, here. With
// data.local the server hears of it only when the student does something else on the page (a press or a focus
// outside these charts): the choice goes with that action, as the pickers' "pick", before it, on the same
// socket; until then a change costs the server nothing (issue 53). The address bar follows each choice at once
// (data.params: the link's names of layer and head, left out at their defaults). Without data.local (a class's
// teacher or following student, the numbers as tables, the projector, "change a word" open) every choice is told at
// once, as a widget would.
export function choice(store = window) {
  return (store.__attentionChoice ||= { layer: 0, head: 0, heads: 1, pending: null, toldAt: null, tell: null,
                                        listening: false, views: new Set() });
}

// The address bar's query with the chosen layer and head (each left out at its default, as the server's links do).
export function linkWith(search, params, defaults, layer, head) {
  const query = new URLSearchParams(search);
  for (const [name, value] of [["layer", layer], ["head", head]]) {
    if (value === defaults[name]) query.delete(params[name]); else query.set(params[name], String(value));
  }
  const text = query.toString();
  return text ? `?${text}` : "";
}

function choose(layer, head, d) {
  const c = choice();
  if (c.layer === layer && c.head === head) return;
  Object.assign(c, { layer, head });
  for (const view of c.views) view.show?.(layer, head);
  const index = layer * c.heads + head;
  if (!d.local) { c.tell?.("pick", index); return; }
  const search = linkWith(window.location.search, d.params, d.defaults, layer, head);
  if (search !== window.location.search) {
    window.history.replaceState(window.history.state, "", `${window.location.pathname}${search}${window.location.hash}`);
  }
  c.pending = index;
  if (!c.listening) {
    c.listening = true;
    listenElsewhere(c);
  }
}

// The student's next action elsewhere on the page tells the server the choice first ("pick": a run of the pickers'
// own fragment). A focus or a key tells it at once (a key comes a moment after its focus). A press tells it too, but
// its click waits until the pick's run has ended and is then clicked again: Streamlit sends the widget changes of
// one moment as one message, run as the first one's fragment, so a click sent with the pick was run as the pickers'
// fragment only (a toggle set and the page not redrawn, a page change left empty; Streamlit 1.67).
const RUN_MS = 4000;                    // a click waits at most this long for the pick's run

function listenElsewhere(c) {
  const runs = { started: 0, running: false, after: [], root: null };    // the app's runs, as its root says them
  const watch = () => {
    const root = document.querySelector("[data-testid='stApp']");
    if (!root || runs.root === root) return;
    runs.root = root;
    new MutationObserver(() => {
      const running = root.dataset.testScriptState === "running";
      if (running && !runs.running) runs.started += 1;
      runs.running = running;
      if (!running) for (const then of runs.after.splice(0)) then();
    }).observe(root, { attributes: true, attributeFilter: ["data-test-script-state"] });
  };
  const elsewhere = (event) => !event.target?.closest?.(".attention-local");
  const tell = () => {
    watch();
    const pick = c.pending;
    c.pending = null;
    c.toldAt = runs.started;                     // the pick's run is the next to start
    c.tell?.("pick", pick);
  };
  const pickToCome = () => c.toldAt !== null && (runs.started === c.toldAt || runs.running);
  for (const type of ["pointerdown", "focusin", "keydown"]) {
    document.addEventListener(type, (event) => { if (c.pending !== null && elsewhere(event)) tell(); }, true);
  }
  document.addEventListener("click", (event) => {
    if (!event.isTrusted || !elsewhere(event)) return;            // not ours again, nor the charts' own
    if (c.pending !== null) tell();              // a click with no press before it (Enter on a link)
    if (!pickToCome() || event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey) {
      c.toldAt = null;
      return;
    }
    event.preventDefault();
    event.stopImmediatePropagation();
    const target = event.target;
    let done = false;
    const again = () => { if (!done) { done = true; c.toldAt = null; target.click(); } };
    runs.after.push(again);
    setTimeout(again, RUN_MS);
  }, true);
}

// The two pickers, drawn like Streamlit's selectboxes: a label above a list.
function mountPickers(component, data) {
  const { setTriggerValue, parentElement: host } = component;
  const c = choice();
  c.tell = setTriggerValue;
  c.heads = data.n_heads;
  if (c.pending === null) Object.assign(c, { layer: data.layer, head: data.head });
  let view = host.__attentionPickers;
  if (!view) {
    if (!document.getElementById("attention-pickers-style")) {     // the focus ring of Streamlit's own lists
      const style = document.createElement("style");
      style.id = "attention-pickers-style";
      style.textContent = ".attention-pickers select:focus-visible{outline:none;border-color:rgb(255,75,75)!important;" +
                          "box-shadow:0 0 0 1px rgb(255,75,75)}";
      document.head.appendChild(style);
    }
    const box = document.createElement("div");
    box.className = "attention-pickers attention-local";
    box.style.cssText = "display:flex;gap:1rem;width:100%";
    host.appendChild(box);
    view = host.__attentionPickers = { box, selects: {} };
    for (const name of ["layer", "head"]) {
      const label = document.createElement("label");
      label.style.cssText = "flex:1;display:flex;flex-direction:column;gap:0.25rem;font-size:0.875rem;" +
                            `color:rgb(49,51,63);font-family:${FONT}`;
      const caption = document.createElement("span");
      const select = document.createElement("select");
      select.dataset.key = name;
      select.style.cssText = "height:2.5rem;border-radius:0.5rem;border:1px solid rgb(240,242,246);" +
                             "background:rgb(240,242,246);color:rgb(49,51,63);padding:0 0.75rem;font-size:1rem;" +
                             `font-family:${FONT};cursor:pointer`;
      select.addEventListener("change", () => {
        const at = view.data;
        choose(Number(view.selects.layer.value), Number(view.selects.head.value), at);
      });
      label.append(caption, select);
      box.appendChild(label);
      view.selects[name] = select;
      view[`${name}Caption`] = caption;
    }
    view.show = (layer, head) => { view.selects.layer.value = String(layer); view.selects.head.value = String(head); };
    c.views.add(view);
  }
  view.data = data;
  for (const [name, count] of [["layer", data.n_layers], ["head", data.n_heads]]) {
    view[`${name}Caption`].textContent = data.labels[name];
    const select = view.selects[name];
    if (select.options.length !== count) {
      select.replaceChildren(...Array.from({ length: count }, (_, i) => new Option(String(i), String(i))));
    }
  }
  view.show(c.layer, c.head);
  return () => { c.views.delete(view); delete host.__attentionPickers; };
}

// With data.local, the one-head chart's own words that follow the chosen head: its sentence for screen readers
// (data.said, one per head) and its numbers as CSV (data.csv: the button's words, the file names, the tokens).
function followHead(view, data, Plotly) {
  if (!data.local) {                            // the server chooses now (a class, tables...): its words are drawn
    view.said?.remove();
    view.csv?.remove();
    view.said = view.csv = view.show = null;
    return;
  }
  if (!view.said) {
    view.said = document.createElement("p");
    view.said.style.cssText = HIDDEN;
    view.csv = document.createElement("button");
    view.csv.type = "button";
    view.csv.className = "attention-csv";
    view.csv.style.cssText = "margin-top:0.5rem;padding:0.25rem 0.75rem;border-radius:0.5rem;min-height:2.5rem;" +
                             "border:1px solid rgba(49,51,63,0.2);background:white;color:rgb(49,51,63);" +
                             `font-family:${FONT};font-size:1rem;cursor:pointer`;
    view.csv.addEventListener("click", () => download(view));
    view.div.after(view.said, view.csv);
  }
  view.show = (layer, head) => {
    const d = view.data;
    const [, nH] = d.numbers.shape;
    const k = layer * nH + head;
    view.said.textContent = d.said[k];
    view.csv.textContent = d.csv.label.replace("{name}", d.csv.names[k]);
    if (view.drawn && view.shownHead !== k) {
      view.shownHead = k;
      Plotly.update(view.div, { visible: d.names.map((_, m) => m === k) },
                    { "title.text": `<b>${d.names[k]}</b>`, "updatemenus[0].active": k });
    }
  };
}

const HIDDEN = "position:absolute;width:1px;height:1px;padding:0;margin:-1px;overflow:hidden;clip:rect(0,0,0,0);" +
               "white-space:nowrap;border:0";

// Python's format(v, ".6g"), for weights in [0, 1].
export function g6(v) {
  if (v === 0) return "0";
  const exponent = Math.floor(Math.log10(Math.abs(v)));
  if (exponent < -4) {
    const [mantissa, power] = v.toExponential(5).split("e");
    const p = Number(power);
    return `${trimmed(mantissa)}e${p < 0 ? "-" : "+"}${String(Math.abs(p)).padStart(2, "0")}`;
  }
  return trimmed(v.toFixed(Math.max(0, 5 - exponent)));
}

const trimmed = (text) => (text.includes(".") ? text.replace(/0+$/, "").replace(/\.$/, "") : text);

// model.analysis.readings.matrix_csv: the matrix with its positions and tokens as headers (csv's quoting, \r\n).
export function matrixCsv(values, k, tq, tk, rows, cols) {
  const field = (text) => (/[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text);
  const lines = [["", ...cols.map((c, j) => `${j}:${c}`)].map(field).join(",")];
  for (let r = 0; r < tq; r++) {
    const cells = Array.from(values.subarray((k * tq + r) * tk, (k * tq + r + 1) * tk), g6);
    lines.push([field(`${r}:${rows[r]}`), ...cells].join(","));
  }
  return lines.join("\r\n") + "\r\n";
}

function download(view) {
  const d = view.data;
  const [, nH, tq, tk] = d.numbers.shape;
  const c = choice();
  const k = c.layer * nH + c.head;
  numbersFor(d.numbers).then((values) => {
    if (!values) return;
    const blob = new Blob([matrixCsv(values, k, tq, tk, d.csv.rows, d.csv.cols)], { type: "text/csv" });
    const link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = `${d.csv.names[k]}.csv`;
    view.csv.after(link);                       // inside the chart's element: not a click elsewhere (`listenElsewhere`)
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
  });
}

// The component: draws data.chart ("grid" or "single") into its element and redraws it when the server sends new
// data (Plotly.react: only what changed); the one-head chart's menu chooses a head (`choose`). "pickers" draws the
// layer and head pickers. Streamlit calls this again on every run that draws the element; what is drawn lives on
// the element.
export default function (component) {
  const { setTriggerValue, parentElement: host } = component;
  const [data] = component.data;                          // one item: app/attention_charts.py sends a list
  if (data.chart === "pickers") return mountPickers(component, data);
  let view = host.__attention;
  if (!view) {
    const div = document.createElement("div");
    div.className = "attention-chart";
    host.appendChild(div);
    view = host.__attention = { div, tell: setTriggerValue, drawn: null, data: null, ready: null };
    view.resize = new ResizeObserver(() => {
      if (view.drawn && window.Plotly && div.clientWidth && div.clientWidth !== view.width) {
        view.width = div.clientWidth;
        window.Plotly.relayout(div, { width: view.width });
      }
    });
    view.resize.observe(div);
  }
  view.tell = setTriggerValue;
  view.data = data;
  host.classList.toggle("attention-local", Boolean(data.local));
  view.div.dataset.state = "drawing";                      // "drawn" once this data is on the screen (tests wait on it)
  const c = choice();
  if (data.chart === "single") {
    if (!data.local || c.pending === null) Object.assign(c, { layer: data.layer, head: data.head });
    c.heads = data.numbers.shape[1];
    if (!c.tell || !data.local) c.tell = setTriggerValue;
  }
  Promise.all([plotly(data.plotly), numbersFor(data.numbers)]).then(([Plotly, values]) => {
    if (view.data !== data || values !== null) return [Plotly, values];
    // sent by name, not held here: ask the server, whose next run sends them (with the grid: this chart's data
    // may be the same then, and not handed to it again), and draw when they come
    view.div.dataset.state = "missing";
    view.tell("missing", data.numbers.ref);
    return numbersFor(data.numbers, window, ASKED_MS).then((later) => [Plotly, later]);
  }).then(([Plotly, values]) => {
    if (view.data !== data) return;                        // a newer run's data came meanwhile: it draws
    if (values === null) throw new Error("its numbers did not come");
    const shownData = data.chart === "single" ? { ...data, layer: c.layer, head: c.head } : data;
    const fig = data.chart === "grid" ? gridFigure(shownData, values) : headsFigure(shownData, values);
    view.width = view.div.clientWidth || undefined;
    const config = { displaylogo: false, displayModeBar: "hover", responsive: false,
                     toImageButtonOptions: { format: data.image_format, filename: data.chart, scale: 2 } };
    const shown = themed(fig, view.width);
    return Plotly.react(view.div, shown.data, shown.layout, config).then(() => {
      if (!view.drawn && data.chart === "single") {
        view.div.on("plotly_buttonclicked", (event) => {
          const at = view.data;
          const nH = at.numbers.shape[1];
          view.shownHead = event.active;
          choose(Math.floor(event.active / nH), event.active % nH, at);
        });
      }
      view.drawn = data;
      if (data.chart === "single") {
        view.shownHead = c.layer * data.numbers.shape[1] + c.head;
        followHead(view, data, Plotly);
        if (view.show) { c.views.add(view); view.show(c.layer, c.head); } else c.views.delete(view);
      }
      if (view.data === data) view.div.dataset.state = "drawn";
    });
  }).catch((error) => {
    view.div.dataset.state = "failed";
    view.div.textContent = `This chart could not be drawn: ${error.message}`;
  });
  return () => {
    view.resize.disconnect();
    c.views.delete(view);
    if (window.Plotly) window.Plotly.purge(view.div);
    delete host.__attention;
  };
}
