// The memory browser's page: timeline, search, map, episode view and live updates.
// Plain JavaScript over the server's JSON (/api/...); nothing is loaded from elsewhere.
// Data from the store is only ever put into the page as text (textContent), never as HTML.
"use strict";

(() => {
  const $ = (sel) => document.querySelector(sel);
  const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf",
    "#8c564b", "#e377c2"];
  const RECENT = 16;

  const state = {
    info: null,
    eps: [],            // records in the order added: {id, robot, t, surprise, threshold, x, y, z,
                        // frame, camera, view, kind}: kind "episode" or "place" (a place keyframe)
    ids: new Set(),
    curve: null,
    robotColor: new Map(),
    robot: "",          // the robot filter ("" = every robot)
    camera: null,       // the camera filter (null = every camera; "" = the unnamed one)
    mapFrame: null,
    selection: null,    // [t0, t1] picked on the timeline
    place: null,        // [x, y] picked on the map
    showPlaces: true,   // the map's layer of place keyframes
    episode: null,      // the open episode's detail
    playTimer: null,
    frameIndex: 0,
    loaded: false,
    pending: [],        // live events that arrived while the timeline was loading
    fresh: new Set(),   // ids that arrived live
  };
  // for tests and the benchmark: when the first load was drawn, and the live state
  window.sm = {
    ready: false, readyAt: null, loadMs: null, live: "connecting", episodes: 0, loads: 0,
  };

  async function getJSON(url, options) {
    const response = await fetch(url, options);
    if (response.status === 401) {  // the server has a token and this browser is not signed in
      window.location.assign("/login");
      throw new Error("sign in first");
    }
    let body = null;
    try {
      body = await response.json();
    } catch (err) {
      body = null;
    }
    if (!response.ok) {
      throw new Error((body && body.error) || `${response.status} ${response.statusText}`);
    }
    return body;
  }

  function rows(cols) {
    const out = [];
    for (let i = 0; i < cols.id.length; i += 1) {
      out.push({
        id: cols.id[i], robot: cols.robot[i], t: cols.t[i], surprise: cols.surprise[i],
        threshold: cols.threshold[i], x: cols.x[i], y: cols.y[i], z: cols.z[i],
        frame: cols.frame[i], camera: cols.camera[i], view: cols.view[i],
        kind: cols.kind ? cols.kind[i] : "episode",
      });
    }
    return out;
  }

  const fmt = (v, digits = 2) => (v === null || v === undefined ? "–" : Number(v).toFixed(digits));
  const isPlace = (e) => e.kind === "place";

  // a length of time in its two largest units, as the command line says it ("3 h 12 min")
  function durationText(seconds) {
    if (!Number.isFinite(seconds)) return "unknown";
    let rest = Math.round(Math.abs(seconds));
    const units = [[86400, "d"], [3600, "h"], [60, "min"], [1, "s"]].map(([size, name]) => {
      const n = Math.floor(rest / size);
      rest -= n * size;
      return [n, name];
    });
    const first = units.findIndex(([n]) => n > 0);
    if (first < 0) return "0 s";
    return units.slice(first, first + 2).filter(([n]) => n > 0).map(([n, u]) => `${n} ${u}`).join(" ");
  }

  function colorOf(robot) {
    if (!state.robotColor.has(robot)) {
      state.robotColor.set(robot, COLORS[state.robotColor.size % COLORS.length]);
    }
    return state.robotColor.get(robot);
  }

  function visible() {
    return state.eps.filter((e) => (!state.robot || e.robot === state.robot)
      && (state.camera === null || e.camera === state.camera));
  }

  // ------------------------------------------------------------------ loading
  async function loadAll() {
    const t0 = performance.now();
    state.loaded = false;
    try {
      const [info, timeline, curve] = await Promise.all([
        getJSON("/api/store"), getJSON("/api/timeline"), getJSON("/api/curve"),
      ]);
      state.info = info;
      state.curve = curve.available ? curve : null;
      state.eps = rows(timeline);
      state.ids = new Set(state.eps.map((e) => e.id));
      $("#load-error").hidden = true;
    } catch (err) {
      $("#load-error").textContent = `cannot load the store: ${err.message}`;
      $("#load-error").hidden = false;
      return;
    }
    state.loaded = true;
    const queued = state.pending;
    state.pending = [];
    queued.forEach(applyChange);
    renderInfo();
    renderAll();
    window.sm.loads += 1;
    window.sm.loadMs = performance.now() - t0;
    if (!window.sm.ready) window.sm.readyAt = performance.now(); // ms since navigation began
    window.sm.ready = true;
  }

  function renderInfo() {
    const info = state.info;
    $("#store-location").textContent = `${info.backend}: ${info.location}`;
    $("#untrained").hidden = !info.untrained;
    $("#synthetic").hidden = !info.synthetic;
    const text = info.search.text;
    $("#text-note").hidden = text.ok;
    $("#text-note").textContent = text.ok ? "" : `Text search is not available: ${text.reason}`;
    const image = info.search.image;
    $("#image-note").textContent = !image.ok ? image.reason
      : (image.untrained ? "uses the store's embedder (random weights: ranks by random features)"
        : "uses the store's embedder");
    $("#q-k").max = info.max_results_cap;
  }

  function renderAll() {
    const places = state.eps.filter(isPlace).length;
    $("#episode-count").textContent = String(state.eps.length - places);
    $("#place-count").textContent = String(places);
    $("#place-count-box").hidden = places === 0;
    window.sm.episodes = state.eps.length - places;
    window.sm.places = places;
    renderRobots();
    renderCameras();
    renderFrames();
    drawTimeline();
    drawMap();
    renderRecent();
  }

  function renderRobots() {
    const select = $("#q-robot");
    const robots = [...new Set(state.eps.map((e) => e.robot))].sort();
    const have = [...select.options].map((o) => o.value).slice(1);
    if (have.join("\n") !== robots.join("\n")) {
      select.length = 1;
      robots.forEach((r) => select.add(new Option(r, r)));
      select.value = robots.includes(state.robot) ? state.robot : "";
    }
    const legend = $("#map-legend");
    legend.textContent = "";
    robots.forEach((r) => {
      const item = document.createElement("span");
      const dot = document.createElement("i");
      dot.style.background = colorOf(r);
      item.append(dot, r);
      legend.append(item);
    });
  }

  function renderCameras() {
    // the one unnamed camera (a one-camera robot) is listed as "(unnamed)", value " "
    const select = $("#q-camera");
    const cameras = [...new Set(state.eps.map((e) => e.camera || ""))].sort();
    const have = [...select.options].map((o) => o.value.trim()).slice(1);
    if (have.join("\n") !== cameras.join("\n")) {
      select.length = 1;
      cameras.forEach((c) => select.add(new Option(c || "(unnamed)", c || " ")));
      const keep = state.camera !== null && cameras.includes(state.camera);
      select.value = keep ? state.camera || " " : "";
      if (!keep) state.camera = null;
    }
  }

  function cameraText(camera) {
    if (!camera) return "–";
    const name = camera.name || "(unnamed)";
    const frame = camera.frame ? ` (${camera.frame})` : "";
    const view = camera.view_yaw_deg === null ? "direction unknown"
      : `looked toward yaw ${fmt(camera.view_yaw_deg, 0)}°`;
    return `${name}${frame}, ${view}`;
  }

  function renderFrames() {
    const select = $("#map-frame");
    const frames = [...new Set(state.eps.filter((e) => e.frame !== null).map((e) => e.frame))].sort();
    const have = [...select.options].map((o) => o.value);
    if (have.join("\n") !== frames.join("\n")) {
      select.length = 0;
      frames.forEach((f) => select.add(new Option(f || "(no frame name)", f)));
    }
    if (!frames.includes(state.mapFrame)) {
      state.mapFrame = frames.length ? frames[0] : null;
    }
    select.value = state.mapFrame === null ? "" : state.mapFrame;
  }

  // ------------------------------------------------------------------ canvases
  function prepare(canvas) {
    const ratio = window.devicePixelRatio || 1;
    const width = canvas.clientWidth;
    const height = canvas.clientHeight;
    if (canvas.width !== Math.round(width * ratio)) canvas.width = Math.round(width * ratio);
    if (canvas.height !== Math.round(height * ratio)) canvas.height = Math.round(height * ratio);
    const ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    return { ctx, width, height };
  }

  const TL = { left: 44, right: 10, top: 10, bottom: 24 };

  function timelineScale() {
    const canvas = $("#timeline");
    const eps = visible();
    let t0 = Infinity;
    let t1 = -Infinity;
    let s1 = 0;
    eps.forEach((e) => {
      t0 = Math.min(t0, e.t); t1 = Math.max(t1, e.t); s1 = Math.max(s1, e.surprise);
    });
    const c = state.curve;
    if (c && c.t.length) {
      t0 = Math.min(t0, c.t[0]); t1 = Math.max(t1, c.t[c.t.length - 1]);
      c.score.forEach((v) => { if (v !== null) s1 = Math.max(s1, v); });
      c.tau.forEach((v) => { if (v !== null) s1 = Math.max(s1, v); });
    }
    if (!Number.isFinite(t0)) { t0 = 0; t1 = 1; }
    t0 = Math.min(t0, 0); // times count from the recording's first frame
    if (t1 - t0 < 1e-6) { t0 -= 1; t1 += 1; }
    s1 = s1 > 0 ? s1 * 1.1 : 1;
    const w = canvas.clientWidth - TL.left - TL.right;
    const h = canvas.clientHeight - TL.top - TL.bottom;
    return {
      t0, t1, s1,
      x: (t) => TL.left + ((t - t0) / (t1 - t0)) * w,
      y: (s) => TL.top + h - (Math.max(0, s) / s1) * h,
      t: (x) => t0 + ((x - TL.left) / w) * (t1 - t0),
    };
  }

  // the timeline's records: the place keyframes only while their layer shows (a robot
  // keeps thousands, all at surprise 0: they would hide the axis)
  function timelineRecords() {
    return visible().filter((e) => state.showPlaces || !isPlace(e));
  }

  function drawTimeline() {
    const { ctx, width, height } = prepare($("#timeline"));
    const sc = timelineScale();
    ctx.strokeStyle = "#bbb";
    ctx.beginPath();
    ctx.moveTo(TL.left, TL.top); ctx.lineTo(TL.left, height - TL.bottom);
    ctx.lineTo(width - TL.right, height - TL.bottom); ctx.stroke();
    ctx.fillStyle = "#555";
    ctx.font = "11px sans-serif";
    for (let i = 0; i <= 5; i += 1) {
      const t = sc.t0 + ((sc.t1 - sc.t0) * i) / 5;
      ctx.fillText(`${t.toFixed(t1Digits(sc))} s`, sc.x(t) - 12, height - 8);
    }
    ctx.fillText(sc.s1.toFixed(2), 4, TL.top + 8);
    ctx.fillText("0", 30, height - TL.bottom);
    if (state.selection) {
      const [a, b] = state.selection;
      ctx.fillStyle = "rgba(31,119,180,0.12)";
      ctx.fillRect(sc.x(a), TL.top, sc.x(b) - sc.x(a), height - TL.top - TL.bottom);
    }
    const c = state.curve;
    if (c) {
      line(ctx, c.t, c.score, sc, "#1f77b4", []);
      line(ctx, c.t, c.tau, sc, "#ff7f0e", [5, 4]);
      ctx.strokeStyle = "rgba(120,120,120,0.7)";
      ctx.setLineDash([2, 3]);
      c.suppressed.forEach((s) => {
        ctx.beginPath(); ctx.moveTo(sc.x(s.t), TL.top); ctx.lineTo(sc.x(s.t), height - TL.bottom);
        ctx.stroke();
      });
      ctx.setLineDash([]);
    }
    const current = state.episode ? state.episode.id : null;
    timelineRecords().forEach((e) => {
      if (isPlace(e)) {  // surprise 0: a hollow square on the axis, as on the map
        const half = e.id === current ? 5 : 3;
        ctx.strokeStyle = colorOf(e.robot);
        ctx.strokeRect(sc.x(e.t) - half, sc.y(0) - half, 2 * half, 2 * half);
        return;
      }
      ctx.fillStyle = colorOf(e.robot);
      ctx.beginPath();
      ctx.arc(sc.x(e.t), sc.y(e.surprise), e.id === current ? 6 : 3.5, 0, 2 * Math.PI);
      ctx.fill();
      if (e.id === current || state.fresh.has(e.id)) {
        ctx.strokeStyle = e.id === current ? "#000" : "#2e7d32";
        ctx.lineWidth = 2; ctx.stroke(); ctx.lineWidth = 1;
      }
    });
    $("#timeline-note").textContent = c
      ? `surprise s(t) (blue) and its threshold τ (dashed) over ${c.frames} scored frames; `
        + "dots: stored episodes; dotted lines: candidates suppressed (habituation, budget)"
      : `dots: stored episodes at their surprise (${state.info && state.info.backend === "folder"
        ? "no per-frame scores: this store was not written by `surprise-memory process`"
        : "a database store keeps no per-frame scores"})`;
  }

  function t1Digits(sc) {
    return sc.t1 - sc.t0 < 20 ? 1 : 0;
  }

  function line(ctx, ts, vs, sc, color, dash) {
    ctx.strokeStyle = color;
    ctx.setLineDash(dash);
    ctx.beginPath();
    let open = false;
    for (let i = 0; i < ts.length; i += 1) {
      if (vs[i] === null) { open = false; continue; }
      const x = sc.x(ts[i]);
      const y = sc.y(vs[i]);
      if (open) ctx.lineTo(x, y); else ctx.moveTo(x, y);
      open = true;
    }
    ctx.stroke();
    ctx.setLineDash([]);
  }

  function nearest(points, x, y, within) {
    let best = null;
    let bestD = within * within;
    points.forEach((p) => {
      const d = (p.px - x) ** 2 + (p.py - y) ** 2;
      if (d <= bestD) { bestD = d; best = p.ep; }
    });
    return best;
  }

  function setupTimeline() {
    const canvas = $("#timeline");
    let down = null;
    const xOf = (ev) => ev.clientX - canvas.getBoundingClientRect().left;
    canvas.addEventListener("mousedown", (ev) => { down = xOf(ev); });
    canvas.addEventListener("mouseup", (ev) => {
      if (down === null) return;
      const up = xOf(ev);
      const sc = timelineScale();
      if (Math.abs(up - down) > 4) {
        const a = sc.t(Math.min(up, down));
        const b = sc.t(Math.max(up, down));
        state.selection = [a, b];
        $("#q-start").value = a.toFixed(1);
        $("#q-end").value = b.toFixed(1);
        drawTimeline();
        runSearch();
      } else {
        const y = ev.clientY - canvas.getBoundingClientRect().top;
        const pts = timelineRecords().map((e) => ({ ep: e, px: sc.x(e.t), py: sc.y(e.surprise) }));
        const hit = nearest(pts, up, y, 8);
        if (hit) openEpisode(hit.id);
      }
      down = null;
    });
  }

  function mapScale(eps) {
    const canvas = $("#map");
    const size = Math.min(canvas.clientWidth, canvas.clientHeight);
    let x0 = Infinity; let x1 = -Infinity; let y0 = Infinity; let y1 = -Infinity;
    eps.forEach((e) => {
      x0 = Math.min(x0, e.x); x1 = Math.max(x1, e.x); y0 = Math.min(y0, e.y); y1 = Math.max(y1, e.y);
    });
    if (state.place) {
      x0 = Math.min(x0, state.place[0]); x1 = Math.max(x1, state.place[0]);
      y0 = Math.min(y0, state.place[1]); y1 = Math.max(y1, state.place[1]);
    }
    if (!Number.isFinite(x0)) { x0 = -1; x1 = 1; y0 = -1; y1 = 1; }
    const span = Math.max(x1 - x0, y1 - y0, 1) * 1.15;
    const cx = (x0 + x1) / 2;
    const cy = (y0 + y1) / 2;
    const k = (size - 20) / span;
    return {
      k, span,
      px: (x) => size / 2 + (x - cx) * k,
      py: (y) => size / 2 - (y - cy) * k,
      x: (px) => cx + (px - size / 2) / k,
      y: (py) => cy - (py - size / 2) / k,
    };
  }

  // the records on the map: posed in its frame; place keyframes only while their layer shows
  function mapEpisodes() {
    return visible().filter((e) => e.frame !== null && e.frame === state.mapFrame
      && (state.showPlaces || !isPlace(e)));
  }

  // a place keyframe: a hollow square, and a short tick toward where its camera looked
  function drawPlace(ctx, sc, e, current) {
    const [x, y] = [sc.px(e.x), sc.py(e.y)];
    ctx.strokeStyle = colorOf(e.robot);
    ctx.lineWidth = e.id === current ? 2.5 : 1.5;
    if (e.view !== null && e.view !== undefined) {
      const a = (e.view * Math.PI) / 180;
      ctx.beginPath(); ctx.moveTo(x, y); ctx.lineTo(x + 10 * Math.cos(a), y - 10 * Math.sin(a));
      ctx.stroke();
    }
    const half = e.id === current ? 6 : 4;
    ctx.fillStyle = "#fff";
    ctx.fillRect(x - half, y - half, 2 * half, 2 * half);
    ctx.strokeRect(x - half, y - half, 2 * half, 2 * half);
    ctx.lineWidth = 1;
  }

  function drawMap() {
    const { ctx, width, height } = prepare($("#map"));
    const eps = mapEpisodes();
    const sc = mapScale(eps);
    const step = 10 ** Math.floor(Math.log10(sc.span / 2));
    ctx.strokeStyle = "#eee";
    ctx.fillStyle = "#999";
    ctx.font = "10px sans-serif";
    for (let g = Math.ceil(sc.x(0) / step) * step; sc.px(g) < width; g += step) {
      ctx.beginPath(); ctx.moveTo(sc.px(g), 0); ctx.lineTo(sc.px(g), height); ctx.stroke();
      ctx.fillText(`${+g.toFixed(3)}`, sc.px(g) + 2, height - 3);
    }
    for (let g = Math.ceil(sc.y(height) / step) * step; sc.py(g) > 0; g += step) {
      ctx.beginPath(); ctx.moveTo(0, sc.py(g)); ctx.lineTo(width, sc.py(g)); ctx.stroke();
      ctx.fillText(`${+g.toFixed(3)}`, 2, sc.py(g) - 2);
    }
    if (state.place) {
      const [px, py] = [sc.px(state.place[0]), sc.py(state.place[1])];
      const radius = parseFloat($("#q-radius").value);
      if (radius > 0) {
        ctx.fillStyle = "rgba(31,119,180,0.10)";
        ctx.beginPath(); ctx.arc(px, py, radius * sc.k, 0, 2 * Math.PI); ctx.fill();
      }
      ctx.strokeStyle = "#000";
      ctx.beginPath(); ctx.moveTo(px - 6, py); ctx.lineTo(px + 6, py);
      ctx.moveTo(px, py - 6); ctx.lineTo(px, py + 6); ctx.stroke();
    }
    const current = state.episode ? state.episode.id : null;
    let arrows = 0;
    const places = eps.filter(isPlace);
    places.forEach((e) => drawPlace(ctx, sc, e, current));  // under the episodes' dots
    const episodes = eps.filter((e) => !isPlace(e));
    episodes.forEach((e) => {
      ctx.fillStyle = colorOf(e.robot);
      ctx.strokeStyle = colorOf(e.robot);
      if (e.view !== null && e.view !== undefined) {  // where its camera looked
        const a = (e.view * Math.PI) / 180;
        const [x0, y0] = [sc.px(e.x), sc.py(e.y)];
        const [x1, y1] = [x0 + 16 * Math.cos(a), y0 - 16 * Math.sin(a)];
        ctx.lineWidth = 2;
        ctx.beginPath(); ctx.moveTo(x0, y0); ctx.lineTo(x1, y1); ctx.stroke();
        ctx.lineWidth = 1;
        ctx.beginPath(); ctx.moveTo(x1, y1);
        ctx.lineTo(x1 - 7 * Math.cos(a - 0.45), y1 + 7 * Math.sin(a - 0.45));
        ctx.lineTo(x1 - 7 * Math.cos(a + 0.45), y1 + 7 * Math.sin(a + 0.45));
        ctx.closePath(); ctx.fill();
        arrows += 1;
      }
      ctx.beginPath();
      ctx.arc(sc.px(e.x), sc.py(e.y), e.id === current ? 6 : 3.5, 0, 2 * Math.PI);
      ctx.fill();
      if (e.id === current) { ctx.strokeStyle = "#000"; ctx.lineWidth = 2; ctx.stroke(); ctx.lineWidth = 1; }
    });
    window.sm.arrows = arrows;  // the episodes' viewing arrows drawn (the page tests read it)
    window.sm.placeMarks = places.length;  // the place keyframes' squares drawn
    const without = visible().filter((e) => e.frame === null).length;
    const inFrame = visible().filter((e) => isPlace(e) && e.frame === state.mapFrame).length;
    const placeNote = !inFrame ? ""
      : `; ${inFrame} place keyframes` + (state.showPlaces ? "" : " (hidden)");
    $("#map-note").textContent = `${episodes.length} episodes posed in "${state.mapFrame ?? "-"}"`
      + placeNote + (without ? `; ${without} without a pose` : "") + "; axes in metres";
  }

  function setupMap() {
    const canvas = $("#map");
    canvas.addEventListener("click", (ev) => {
      const r = canvas.getBoundingClientRect();
      const x = ev.clientX - r.left;
      const y = ev.clientY - r.top;
      const eps = mapEpisodes();
      const sc = mapScale(eps);
      const hit = nearest(eps.map((e) => ({ ep: e, px: sc.px(e.x), py: sc.py(e.y) })), x, y, 7);
      if (hit) {
        openEpisode(hit.id);
        return;
      }
      state.place = [sc.x(x), sc.y(y)];
      $("#q-near").value = `${state.place[0].toFixed(2)},${state.place[1].toFixed(2)}`;
      if (!$("#q-radius").value) $("#q-radius").value = (sc.span / 8).toFixed(1);
      drawMap();
      runSearch();
    });
    $("#map-places").addEventListener("change", (ev) => {
      state.showPlaces = ev.target.checked;
      drawTimeline();
      drawMap();
    });
    $("#map-frame").addEventListener("change", (ev) => {
      state.mapFrame = ev.target.value;
      state.place = null;
      drawMap();
    });
  }

  // ------------------------------------------------------------------ search
  function searchParams() {
    const p = new URLSearchParams();
    const put = (key, sel) => { const v = $(sel).value.trim(); if (v) p.set(key, v); };
    put("start", "#q-start"); put("end", "#q-end"); put("near", "#q-near");
    put("radius", "#q-radius"); put("robot_id", "#q-robot"); put("k", "#q-k");
    put("kind", "#q-kind");
    if (state.camera !== null) p.set("camera", state.camera);
    if (p.has("near") && state.mapFrame !== null) p.set("near_frame", state.mapFrame);
    return p;
  }

  async function runSearch(image) {
    const params = searchParams();
    const text = $("#q-text").value.trim();
    let options;
    if (image) {
      options = { method: "POST", body: image,
        headers: { "Content-Type": image.type || "application/octet-stream" } };
    } else if (text) {
      params.set("text", text);
    }
    const msg = $("#search-msg");
    msg.className = "small";
    msg.textContent = "searching…";
    try {
      const t0 = performance.now();
      const answer = await getJSON(`/api/search?${params}`, options);
      const took = performance.now() - t0;
      const places = answer.hits.filter(isPlace).length;
      const found = places === 0 ? `${answer.hits.length} episodes`
        : `${answer.hits.length} results (${answer.hits.length - places} episodes, `
          + `${places} place keyframes)`;
      msg.textContent = `${found}, ranked by ${answer.ranked_by} `
        + `(${took.toFixed(0)} ms)` + (answer.partial ? ` — partial: ${answer.partial}` : "");
      showHits($("#results"), answer.hits, true);
    } catch (err) {
      msg.className = "small error";
      msg.textContent = err.message;
      $("#results").textContent = "";
    }
  }

  function card(hit, withScore) {
    const div = document.createElement("div");
    const place = isPlace(hit);
    div.className = place ? "hit place" : "hit";
    div.dataset.id = hit.id;
    div.dataset.kind = place ? "place" : "episode";
    const img = document.createElement("img");
    img.className = "thumb";
    img.alt = `${place ? "place keyframe" : "episode"} ${hit.id}`;
    img.loading = "lazy";
    img.src = hit.thumbnail;
    const caption = document.createElement("div");
    const kind = document.createElement("span");
    kind.className = "kind";
    kind.textContent = place ? "place · " : "episode · ";
    let text = `t ${fmt(hit.t, 1)} s · s ${fmt(hit.surprise)}`;
    if (withScore && hit.score !== null && hit.score !== undefined) text += ` · score ${fmt(hit.score, 3)}`;
    if (hit.distance_m !== null && hit.distance_m !== undefined) text += ` · ${fmt(hit.distance_m, 1)} m`;
    caption.textContent = `${text} · ${hit.robot_id}` + (hit.camera ? ` · ${hit.camera}` : "")
      + (hit.position && hit.pose_trust ? ` · ${hit.pose_trust.text}` : "");
    caption.prepend(kind);
    div.append(img, caption);
    div.addEventListener("click", () => openEpisode(hit.id));
    return div;
  }

  function showHits(box, hits, withScore) {
    box.textContent = "";
    hits.forEach((h) => box.append(card(h, withScore)));
  }

  function renderRecent() {
    // the surprise episodes: the place keyframes (many, and dull) are on the map
    const latest = state.eps.filter((e) => !isPlace(e)).slice(-RECENT).reverse();
    const box = $("#recent");
    box.textContent = "";
    latest.forEach((e) => {
      const div = card({
        id: e.id, kind: e.kind, t: e.t, surprise: e.surprise, robot_id: e.robot, camera: e.camera,
        score: null, distance_m: null,
        thumbnail: `/api/episodes/${encodeURIComponent(e.id)}/thumbnail`,  // the trigger's frame
      }, false);
      if (state.fresh.has(e.id)) div.classList.add("new");
      box.append(div);
    });
  }

  function setupSearch() {
    $("#search-form").addEventListener("submit", (ev) => { ev.preventDefault(); runSearch(); });
    $("#image-btn").addEventListener("click", () => {
      const file = $("#q-image").files[0];
      if (!file) {
        $("#search-msg").className = "small error";
        $("#search-msg").textContent = "choose an image file first";
        return;
      }
      runSearch(file);
    });
    $("#clear-btn").addEventListener("click", () => {
      ["#q-text", "#q-start", "#q-end", "#q-near", "#q-radius"].forEach((s) => { $(s).value = ""; });
      $("#q-image").value = "";
      $("#q-kind").value = "";
      state.selection = null;
      state.place = null;
      $("#results").textContent = "";
      $("#search-msg").textContent = "";
      drawTimeline();
      drawMap();
    });
    $("#q-robot").addEventListener("change", (ev) => {
      state.robot = ev.target.value;
      renderFrames();
      drawTimeline();
      drawMap();
    });
    $("#q-camera").addEventListener("change", (ev) => {
      // "" in the list is "every camera"; the unnamed camera is "(unnamed)" = " "
      state.camera = ev.target.value === "" ? null : ev.target.value.trim();
      renderFrames();
      drawTimeline();
      drawMap();
    });
  }

  // ------------------------------------------------------------------ episode
  async function openEpisode(id) {
    let ep;
    try {
      ep = await getJSON(`/api/episodes/${encodeURIComponent(id)}`);
    } catch (err) {
      $("#search-msg").className = "small error";
      $("#search-msg").textContent = err.message;
      return;
    }
    stopPlay();
    state.episode = ep;
    $("#episode").hidden = false;
    $("#episode").dataset.id = ep.id;
    $("#ep-title").textContent = ep.id;
    const strip = $("#ep-frames");
    strip.textContent = "";
    ep.frames.forEach((url, i) => {
      const img = document.createElement("img");
      img.src = url;
      img.alt = `frame ${i}`;
      img.title = `${fmt(ep.frame_t[i])} s`;
      img.addEventListener("click", () => { stopPlay(); showFrame(i); });
      strip.append(img);
    });
    showFrame(ep.trigger_frame);
    const pose = ep.pose;
    const meta = [
      ["kind", ep.kind === "place" ? `place keyframe, the view of ${ep.place_key}`
        : "surprise episode"],
      ["place now", "…"],
      ["time", `${fmt(ep.t)} s from the start (stamp ${ep.stamp_ns} ns)`],
      ["frames", `${ep.frames.length}, ${fmt(ep.start_t)} … ${fmt(ep.end_t)} s`],
      ["robot", ep.robot_id],
      ["camera", cameraText(ep.camera)],
      ["pose", pose.valid
        ? `x ${fmt(pose.position[0])}, y ${fmt(pose.position[1])}, z ${fmt(pose.position[2])} m, `
          + `yaw ${fmt(pose.yaw_deg, 0)}° in ${pose.frame || "?"}`
        : "none recorded"],
      ["pose trust", pose.valid ? ep.pose_trust.text : "no pose"],
      ["surprise", `${fmt(ep.surprise, 3)} (τ ${fmt(ep.threshold, 3)})`],
      ["encoder", `${ep.encoder.model}${ep.encoder.pretrained ? "" : " (UNTRAINED)"}`],
      ["embedder", `${ep.embedder.model}${ep.embedder.pretrained ? "" : " (UNTRAINED)"}`],
      ["stored", new Date(Number(BigInt(ep.created_wall_ns) / 1000000n)).toISOString()],
      ["bag snapshot", snapshotText(ep.snapshots || [])],
    ];
    const table = $("#ep-meta");
    table.textContent = "";
    meta.forEach(([k, v]) => {
      const tr = table.insertRow();
      const th = document.createElement("th");
      th.textContent = k;
      tr.append(th);
      const td = tr.insertCell();
      td.textContent = v;
      if (k === "place now") td.id = "ep-place";
    });
    showPlaceStatus(ep.id);
    const why = $("#ep-why");
    why.textContent = "";
    ep.why.forEach((w) => { const li = document.createElement("li"); li.textContent = w; why.append(li); });
    drawTimeline();
    drawMap();
  }

  // whether the episode's place was seen since, and still looks the same (its own request:
  // a few store reads that the episode's facts need not wait for)
  async function showPlaceStatus(id) {
    let text;
    let answer = null;
    try {
      answer = await getJSON(`/api/episodes/${encodeURIComponent(id)}/place`);
      text = placeStatusText(answer);
    } catch (err) {
      text = `unknown: ${err.message}`;
    }
    if (!state.episode || state.episode.id !== id) return;  // another episode opened since
    $("#ep-place").textContent = text;
    window.sm.placeStatus = answer;
  }

  function placeStatusText(answer) {
    const s = answer.status;
    if (s === null) return answer.reason;
    if (s.still_there === null) return "not seen since the episode: still there unknown";
    const looks = s.still_there ? "still looks the same" : "looks different now";
    return `last seen ${durationText(s.later_s)} later (${fmt(s.last_seen_t, 1)} s): `
      + `${looks} (similarity ${fmt(s.similarity)})`;
  }

  // what the bag recorder answered when the memory node asked for a snapshot (issue 30)
  function snapshotText(notes) {
    if (!notes.length) return "none asked";
    return notes.map((n) => {
      const at = new Date(Number(BigInt(n.requested_ns) / 1000000n)).toISOString();
      return `${n.kind} ${n.success ? "saved" : "not saved"} (asked ${at})`
        + (n.message ? `: ${n.message}` : "");
    }).join("; ");
  }

  function showFrame(i) {
    const ep = state.episode;
    state.frameIndex = i;
    $("#ep-player").src = ep.frames[i];
    $("#ep-frame-label").textContent = `frame ${i + 1} of ${ep.frames.length}, ${fmt(ep.frame_t[i])} s`
      + (i === ep.trigger_frame ? " (trigger)" : "");
    [...$("#ep-frames").children].forEach((img, k) => img.classList.toggle("current", k === i));
  }

  function stopPlay() {
    if (state.playTimer !== null) clearTimeout(state.playTimer);
    state.playTimer = null;
    $("#ep-play").textContent = "Play";
  }

  function play() {
    const ep = state.episode;
    const next = (state.frameIndex + 1) % ep.frames.length;
    // the frames' own spacing in time, so playback runs at the recording's pace
    const gap = next === 0 ? 0.8 : ep.frame_t[next] - ep.frame_t[state.frameIndex];
    state.playTimer = setTimeout(() => { showFrame(next); play(); },
      Math.min(1000, Math.max(80, gap * 1000)));
  }

  function setupEpisode() {
    $("#ep-play").addEventListener("click", () => {
      if (state.playTimer !== null) { stopPlay(); return; }
      $("#ep-play").textContent = "Pause";
      play();
    });
    $("#ep-close").addEventListener("click", () => {
      stopPlay();
      state.episode = null;
      $("#episode").hidden = true;
      drawTimeline();
      drawMap();
    });
  }

  // ------------------------------------------------------------------ live
  function applyChange(change) {
    const gone = new Set(change.removed);
    if (gone.size) {
      state.eps = state.eps.filter((e) => !gone.has(e.id));
      gone.forEach((id) => state.ids.delete(id));
    }
    rows(change.added).forEach((e) => {
      if (!state.ids.has(e.id)) {
        state.eps.push(e);
        state.ids.add(e.id);
        state.fresh.add(e.id);
      }
    });
  }

  function setupLive() {
    const source = new EventSource("/api/live");
    const mark = (on, text) => {
      $("#live-state").className = on ? "live-on" : "live-off";
      $("#live-state").textContent = text;
      window.sm.live = on ? "on" : "off";
    };
    // the stream opens before the first load, so nothing added in between is missed
    source.addEventListener("hello", () => { mark(true, "● live"); loadAll(); });
    source.addEventListener("resync", () => loadAll());
    source.addEventListener("episodes", (ev) => {
      const change = JSON.parse(ev.data);
      if (!state.loaded) { state.pending.push(change); return; }
      applyChange(change);
      renderAll();
    });
    source.addEventListener("error", () => mark(false, "reconnecting…"));
    // a stream that never opens (a proxy that buffers it) must not keep the page empty
    setTimeout(() => { if (!state.loaded && window.sm.loads === 0) loadAll(); }, 3000);
  }

  window.addEventListener("resize", () => { if (state.loaded) { drawTimeline(); drawMap(); } });
  document.addEventListener("DOMContentLoaded", () => {
    setupTimeline();
    setupMap();
    setupSearch();
    setupEpisode();
    setupLive();
  });
})();
