// The lesson file's script: unpack plotly.js and the lesson (gzip + base64, webpage/page.py), then draw the
// figures the app's builders made and switch them in the page: sentence, attention kind / layer / head, the
// decoding method and its steps (buttons, slider, ← and →), large letters. Nothing is fetched.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const state = { lesson: null, sentence: 0, kind: 0, layer: 0, head: 0, method: "beam", step: 0, large: false };

  function bytes(id) {
    const text = atob($(id).textContent.trim());
    const out = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i);
    return out;
  }

  async function gunzip(id) {
    const stream = new Blob([bytes(id)]).stream().pipeThrough(new DecompressionStream("gzip"));
    return await new Response(stream).text();
  }

  // webpage/page.py `pack`: {"$r": i} stands for table[i]
  function unpack(packed) {
    const table = packed.table, done = new Array(table.length);
    const walk = (v) => {
      if (Array.isArray(v)) return v.map(walk);
      if (v && typeof v === "object") {
        const keys = Object.keys(v);
        if (keys.length === 1 && keys[0] === "$r") {
          if (done[v.$r] === undefined) done[v.$r] = walk(table[v.$r]);
          return done[v.$r];
        }
        const out = {};
        for (const k of keys) out[k] = walk(v[k]);
        return out;
      }
      return v;
    };
    return walk(packed.root);
  }

  // figures/common.py Display.apply for the large letters: the font size and the sequential colour scale
  function onDisplay(figure) {
    const shown = state.large ? state.lesson.display.large : state.lesson.display.normal;
    const layout = figure.layout;
    const delta = shown.font - (layout.font && layout.font.size ? layout.font.size : shown.font);
    layout.font = Object.assign({}, layout.font, { size: shown.font });
    for (const note of layout.annotations || []) {
      if (note.name === "follows-font" && note.font && note.font.size) note.font.size += delta;
    }
    for (const key of Object.keys(layout)) {      // tick labels and axis titles push the margins, never overlap
      if (/^[xy]axis\d*$/.test(key)) layout[key].automargin = true;
    }
    if (state.large && layout.height) {           // larger letters, a taller chart and more room for its title
      layout.height = Math.round(layout.height * 1.3);
      layout.margin = Object.assign({}, layout.margin, { t: 70 });
    }
    for (const trace of figure.data) if (trace.meta === "sequential") trace.colorscale = shown.scale;
    if (layout.meta === "sequential" && layout.coloraxis) layout.coloraxis.colorscale = shown.scale;
    return figure;
  }

  const CONFIG = { displaylogo: false, responsive: true };

  function draw(name, chart, change) {
    const div = document.querySelector(`[data-chart="${name}"]`);
    if (!chart) { div.hidden = true; Plotly.purge(div); return Promise.resolve(); }
    div.hidden = false;
    const figure = onDisplay(structuredClone(chart.figure));
    if (change) change(figure);
    const drawn = Plotly.react(div, figure.data, figure.layout,
                               Object.assign({ toImageButtonOptions: { format: "png", filename: name, scale: 2 } },
                                             CONFIG));
    let said = div.nextElementSibling;
    if (!said || !said.classList.contains("said")) {
      said = document.createElement("p");
      said.className = "said";
      div.after(said);
    }
    said.textContent = chart.said;
    return drawn;
  }

  const current = () => state.lesson.sentences[state.sentence];

  function fill(id, text, asHtml) {
    if (asHtml) $(id).innerHTML = text; else $(id).textContent = text;
  }

  function list(id, items) {
    const ul = $(id);
    ul.replaceChildren();
    for (const html of items) {
      const li = document.createElement("li");
      li.innerHTML = html;
      ul.append(li);
    }
  }

  function options(select, n, chosen) {
    select.replaceChildren();
    for (let i = 0; i < n; i++) select.add(new Option(String(i), String(i), false, i === chosen));
  }

  // ---- attention: one figure per kind holds every head; the page's pickers choose which one is visible
  function attentionKinds() {
    const box = $("kinds");
    box.querySelectorAll("label").forEach((l) => l.remove());
    current().attention.forEach((kind, i) => {
      const label = document.createElement("label");
      const input = document.createElement("input");
      Object.assign(input, { type: "radio", name: "kind", value: String(i), checked: i === state.kind });
      input.addEventListener("change", () => { state.kind = i; drawAttention(true); });
      label.append(input, " " + kind.label);
      box.append(label);
    });
  }

  function drawAttention(newKind) {
    const kind = current().attention[state.kind];
    if (newKind) {
      state.layer = Math.min(state.layer, kind.layers - 1);
      state.head = Math.min(state.head, kind.heads - 1);
      options($("layer"), kind.layers, state.layer);
      options($("head"), kind.heads, state.head);
    }
    $("layer").value = String(state.layer);
    $("head").value = String(state.head);
    fill("kind-caption", kind.caption);
    const shown = state.layer * kind.heads + state.head;
    return draw("attention", kind, (figure) => {
      figure.data.forEach((trace, k) => { trace.visible = k === shown; });
      figure.layout.title = Object.assign({}, figure.layout.title, { text: figure.data[shown].name });
      if (figure.layout.updatemenus && figure.layout.updatemenus[0]) figure.layout.updatemenus[0].active = shown;
    });
  }

  function headMenuFollowed() {       // the figure's own menu of heads: the page's pickers follow it
    const div = document.querySelector('[data-chart="attention"]');
    div.on("plotly_buttonclicked", (event) => {
      const kind = current().attention[state.kind];
      const k = event.active;
      state.layer = Math.floor(k / kind.heads);
      state.head = k % kind.heads;
      $("layer").value = String(state.layer);
      $("head").value = String(state.head);
    });
  }

  // ---- decoding, step by step
  function decoding() { return current().decoding[state.method]; }

  function drawStep() {
    const run = decoding(), n = run.steps.length;
    state.step = Math.max(0, Math.min(state.step, n - 1));
    const step = run.steps[state.step];
    fill("method-caption", run.caption);
    $("step").max = String(n - 1);
    $("step").value = String(state.step);
    $("step").setAttribute("aria-valuetext", String(state.step));
    fill("step-heading", step.heading, true);
    $("prev").disabled = state.step === 0;
    $("reset").disabled = state.step === 0;
    $("next").disabled = state.step >= n - 1;
    $("step-link").href = step.link;
    return Promise.all([draw("tree", step.tree), draw("topk", step.topk), draw("cross", step.cross)]);
  }

  function move(by) { state.step += by; drawStep(); }

  // ---- one sentence, every part
  function drawSentence() {
    const s = current(), drawn = [];
    fill("source-text", s.text);
    fill("output-text", s.output);
    fill("confidence", s.confidence.said, true);
    $("confidence").classList.toggle("flagged", s.confidence.flagged);
    drawn.push(draw("token_confidence", s.token_confidence));
    attentionKinds();
    drawn.push(drawAttention(true));
    drawn.push(drawStep());
    fill("attribution-intro", s.attribution.intro, true);
    fill("attribution-caveat", s.attribution.caveat, true);
    drawn.push(draw("attribution", s.attribution));
    fill("positional-intro", s.positional.intro);
    drawn.push(draw("pe_heatmap", s.positional.heatmap));
    drawn.push(draw("pe_similarity", s.positional.similarity));
    drawn.push(draw("pe_curves", s.positional.curves));
    fill("curves-caption", s.positional.curves_caption);
    fill("masks-intro", s.masks.intro);
    drawn.push(draw("padding0", s.masks.padding[0]));
    drawn.push(draw("padding1", s.masks.padding[1]));
    fill("padding-caption", s.masks.padding_caption);
    drawn.push(draw("causal", s.masks.causal));
    drawn.push(draw("cross_mask", s.masks.cross));
    drawn.push(draw("scores", s.masks.scores));
    drawn.push(draw("weights", s.masks.weights));
    fill("model-name", s.model.name);
    fill("model-languages", s.model.languages);
    fill("model-size", s.model.size);
    list("model-scores", s.model.scores.map((r) => `${r.test}, ${r.decoding}: BLEU ${r.bleu}, chrF ${r.chrf}`));
    list("model-data", s.model.data);
    document.querySelectorAll("[data-link]").forEach((a) => { a.href = s.links[a.dataset.link]; });
    return Promise.all(drawn);
  }

  function wire() {
    $("sentence").addEventListener("change", (e) => {
      state.sentence = Number(e.target.value);
      state.step = 0;
      drawSentence();
    });
    $("large").addEventListener("change", (e) => {
      state.large = e.target.checked;
      document.body.classList.toggle("large", state.large);
      drawSentence();
    });
    $("layer").addEventListener("change", (e) => { state.layer = Number(e.target.value); drawAttention(false); });
    $("head").addEventListener("change", (e) => { state.head = Number(e.target.value); drawAttention(false); });
    document.querySelectorAll('input[name="method"]').forEach((input) => input.addEventListener("change", () => {
      state.method = input.value;
      state.step = 0;
      drawStep();
    }));
    $("reset").addEventListener("click", () => { state.step = 0; drawStep(); });
    $("prev").addEventListener("click", () => move(-1));
    $("next").addEventListener("click", () => move(1));
    $("step").addEventListener("input", (e) => { state.step = Number(e.target.value); drawStep(); });
    document.addEventListener("keydown", (e) => {
      const tag = (e.target && e.target.tagName) || "";
      if (["INPUT", "SELECT", "TEXTAREA"].includes(tag) || e.altKey || e.ctrlKey || e.metaKey) return;
      if (e.key === "ArrowLeft") { move(-1); e.preventDefault(); }
      if (e.key === "ArrowRight") { move(1); e.preventDefault(); }
    });
  }

  async function start() {
    if (!("DecompressionStream" in window)) {
      $("status").hidden = true;
      $("old-browser").hidden = false;
      return;
    }
    const code = await gunzip("plotly-gz");
    const script = document.createElement("script");
    script.textContent = code;
    document.head.append(script);
    state.lesson = unpack(JSON.parse(await gunzip("lesson-gz")));
    state.large = document.body.classList.contains("large");
    $("large").checked = state.large;
    wire();
    await drawSentence();
    headMenuFollowed();
    $("status").textContent = "";
    $("status").hidden = true;
    document.body.dataset.ready = "1";    // for tests: every chart of the first sentence is drawn
  }

  start().catch((error) => {
    $("status").textContent = String(error);
    $("status").classList.add("warning");
    throw error;
  });
})();
