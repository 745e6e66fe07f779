// Animation player of multibody_suite: reads the scene JSON of the page and plays it with
// three.js (inlined above this script, global THREE).  URL hash: #t=0.5 seeks to t = 0.5 s
// and pauses before the first render (used by the tests' headless screenshots).
// Live mode (S.live, served by multibody_control/animation/live.py): the page starts with no
// frame and appends those of the Server-Sent Events stream S.live.events, showing the newest
// until the slider is dragged (or paused); after the stream's "end" event it plays as usual.
(function () {
  "use strict";
  const S = JSON.parse(document.getElementById("scene-data").textContent);
  let F = S.t.length;
  const NS = S.shapes.length, L = S.live;
  const view = document.getElementById("view");
  let renderer;
  try {
    renderer = new THREE.WebGLRenderer({antialias: true, preserveDrawingBuffer: true});
  } catch (err) {
    document.getElementById("title").textContent = S.title;
    document.getElementById("info").textContent =
      "This browser cannot draw WebGL here (" + err.message + "); open the page in another one.";
    return;
  }
  renderer.setPixelRatio(window.devicePixelRatio || 1);
  view.appendChild(renderer.domElement);
  const scene = new THREE.Scene();
  scene.background = new THREE.Color(0xfafafa);
  scene.add(new THREE.AmbientLight(0xffffff, 1.2));
  const sun = new THREE.DirectionalLight(0xffffff, 1.8);
  scene.add(sun);

  const lo = new THREE.Vector3(...S.bounds[0]), hi = new THREE.Vector3(...S.bounds[1]);
  const centre = lo.clone().add(hi).multiplyScalar(0.5);
  const radius = Math.max(hi.clone().sub(lo).length() * 0.5, 1e-3);
  const camera = new THREE.PerspectiveCamera(35, 1, radius * 0.01, radius * 100);
  camera.up.set(...S.up);
  const eye = new THREE.Vector3(...S.eye).normalize();
  const upv = new THREE.Vector3(...S.up);
  const right = new THREE.Vector3().crossVectors(upv, eye).normalize();
  const screenUp = new THREE.Vector3().crossVectors(eye, right).normalize();
  const corners = [];
  for (const x of [lo.x, hi.x]) for (const y of [lo.y, hi.y]) for (const z of [lo.z, hi.z])
    corners.push(new THREE.Vector3(x, y, z).sub(centre));
  const halfW = Math.max(...corners.map((c) => Math.abs(c.dot(right))));
  const halfH = Math.max(...corners.map((c) => Math.abs(c.dot(screenUp))));
  const depth = Math.max(...corners.map((c) => Math.abs(c.dot(eye))));
  const tanHalf = Math.tan((35 / 2) * Math.PI / 180);
  function fitCamera() {  // the whole motion in view at the page's aspect ratio
    const d = 1.15 * Math.max(halfH / tanHalf, halfW / (tanHalf * camera.aspect)) + depth;
    camera.position.copy(centre.clone().add(eye.clone().multiplyScalar(d)));
    sun.position.copy(eye.clone().add(upv).multiplyScalar(d));
    camera.lookAt(centre);
  }
  const controls = new THREE.OrbitControls(camera, renderer.domElement);
  controls.target.copy(centre);
  controls.addEventListener("change", () => draw());

  // backdrop grid in the plane of least motion, behind the mechanism
  const span = Math.max(hi.x - lo.x, hi.y - lo.y, hi.z - lo.z);
  const grid = new THREE.GridHelper(span * 1.4, 14, 0xcccccc, 0xe6e6e6);
  const n = S.normal;
  if (n === 2) grid.rotation.x = Math.PI / 2;
  else if (n === 0) grid.rotation.z = Math.PI / 2;
  grid.position.copy(centre);
  grid.position.setComponent(n, lo.getComponent(n));
  scene.add(grid);

  const meshes = S.shapes.map((s) => {
    let g;
    if (s.kind === "box") g = new THREE.BoxGeometry(s.dims[0], s.dims[1], s.dims[2]);
    else if (s.kind === "cylinder") {
      g = new THREE.CylinderGeometry(s.dims[0], s.dims[0], s.dims[1], 24);
      g.rotateX(Math.PI / 2);  // URDF cylinders run along local z, three.js ones along y
    } else g = new THREE.SphereGeometry(s.dims[0], 20, 14);
    const m = new THREE.Mesh(g, new THREE.MeshLambertMaterial({color: s.color}));
    m.visible = F > 0;  // live: nothing drawn before the first frame
    scene.add(m);
    return m;
  });

  const K = L ? L.nseg : (F ? S.segments[0].length / 6 : 0);
  const segGeom = new THREE.BufferGeometry();
  segGeom.setAttribute("position", new THREE.Float32BufferAttribute(new Float32Array(K * 6), 3));
  // lines are drawn over the links: a path in the plane of the links stays visible
  const segs = new THREE.LineSegments(segGeom, new THREE.LineBasicMaterial({color: 0xff7f0e, depthTest: false}));
  segs.renderOrder = 10;
  scene.add(segs);

  const legend = document.getElementById("legend");
  for (const p of S.paths) {
    const g = new THREE.BufferGeometry();
    g.setAttribute("position", new THREE.Float32BufferAttribute(p.points, 3));
    const mat = p.dashed
      ? new THREE.LineDashedMaterial({color: p.color, dashSize: radius * 0.03, gapSize: radius * 0.02, depthTest: false})
      : new THREE.LineBasicMaterial({color: p.color, depthTest: false});
    const line = new THREE.Line(g, mat);
    line.renderOrder = 11;
    if (p.dashed) line.computeLineDistances();
    scene.add(line);
    const item = document.createElement("div");
    item.innerHTML = `<span style="color:${p.color}">${p.dashed ? "- - -" : "&#9472;&#9472;"}</span> ${p.name}`;
    legend.appendChild(item);
  }

  const slider = document.getElementById("slider"), label = document.getElementById("time");
  const button = document.getElementById("play"), speedSel = document.getElementById("speed");
  slider.max = Math.max(F - 1, 0);
  let fitted = false, frame = 0, playing = true, clock = S.t[0], last = null;
  let follow = !!L;  // live: show the newest frame as it arrives

  function setFrame(f) {
    frame = Math.min(Math.max(f, 0), F - 1);
    if (frame < 0) return;
    if (!meshes[0] || !meshes[0].visible) for (const m of meshes) m.visible = true;
    const P = S.poses[frame];
    for (let s = 0; s < NS; s++) {
      const o = 7 * s;
      meshes[s].position.set(P[o], P[o + 1], P[o + 2]);
      meshes[s].quaternion.set(P[o + 3], P[o + 4], P[o + 5], P[o + 6]);
    }
    if (K) {
      segGeom.attributes.position.array.set(S.segments[frame]);
      segGeom.attributes.position.needsUpdate = true;
    }
    slider.value = frame;
    label.textContent = `t = ${S.t[frame].toFixed(3)} s`;
    document.body.dataset.frame = frame;
  }
  function frameAt(time) {  // last frame at or before `time`
    let f = 0;
    while (f + 1 < F && S.t[f + 1] <= time + 1e-9) f++;
    return f;
  }
  function draw() { renderer.render(scene, camera); }
  function resize() {
    const w = view.clientWidth, h = view.clientHeight;
    renderer.setSize(w, h);
    camera.aspect = w / Math.max(h, 1);
    camera.updateProjectionMatrix();
    if (!fitted) { fitCamera(); controls.update(); fitted = true; }
    draw();
  }
  function setPlaying(p) { playing = p; button.textContent = p ? "pause" : "play"; last = null; }
  button.onclick = () => {
    if (L && L.running) {  // live: pause holds the frame shown, play follows the newest again
      follow = !follow;
      setPlaying(follow);
      if (follow && F) { setFrame(F - 1); draw(); }
      return;
    }
    if (!playing && frame >= F - 1) clock = S.t[0];
    else clock = S.t[frame];
    setPlaying(!playing);
  };
  slider.oninput = () => { follow = false; setPlaying(false); setFrame(+slider.value); clock = S.t[frame]; draw(); };
  window.addEventListener("keydown", (e) => {  // space: play/pause; arrows: one frame
    if (e.target.tagName === "SELECT") return;
    if (e.key === " ") { e.preventDefault(); button.onclick(); }
    else if (e.key === "ArrowRight" || e.key === "ArrowLeft") {
      e.preventDefault();
      follow = false;
      setPlaying(false);
      setFrame(frame + (e.key === "ArrowRight" ? 1 : -1));
      clock = S.t[frame];
      draw();
    }
  });
  function tick(now) {
    if (playing && F > 1 && !follow) {
      if (last !== null) {
        clock += (now - last) / 1000 * parseFloat(speedSel.value);
        if (clock > S.t[F - 1]) clock = S.t[0];  // loop
      }
      last = now;
      const f = frameAt(clock);
      if (f !== frame) { setFrame(f); draw(); }
    }
    requestAnimationFrame(tick);
  }

  const hash = new URLSearchParams(location.hash.slice(1));
  document.getElementById("title").textContent = S.title;
  document.getElementById("info").textContent = S.info;
  window.addEventListener("resize", resize);
  const seek = hash.has("t") ? parseFloat(hash.get("t")) : null;
  if (seek !== null) { follow = false; setPlaying(false); setFrame(frameAt(seek)); }
  else setFrame(0);
  resize();
  document.body.dataset.ready = "1";
  if (L) startLive();
  requestAnimationFrame(tick);

  function startLive() {
    // the end-effector path grows with the frames
    let eeGeom = null, nee = 0;
    if (L.ee) {
      eeGeom = new THREE.BufferGeometry();
      eeGeom.setAttribute("position", new THREE.Float32BufferAttribute(new Float32Array(L.capacity * 3), 3));
      eeGeom.setDrawRange(0, 0);
      const line = new THREE.Line(eeGeom, new THREE.LineBasicMaterial({color: L.ee_color, depthTest: false}));
      line.renderOrder = 11;
      line.frustumCulled = false;
      scene.add(line);
      const item = document.createElement("div");
      item.innerHTML = `<span style="color:${L.ee_color}">&#9472;&#9472;</span> ${L.ee} path`;
      legend.appendChild(item);
    }
    const info = document.getElementById("info");
    L.running = true;
    document.body.dataset.live = "running";
    const source = new EventSource(L.events);
    source.onmessage = (ev) => {
      const m = JSON.parse(ev.data);
      if (m.k !== F) return;  // a repeat after a reconnection
      S.t.push(m.t); S.poses.push(m.pose); S.segments.push(m.seg);
      F++;
      slider.max = F - 1;
      if (eeGeom && m.ee && nee < L.capacity) {
        eeGeom.attributes.position.array.set(m.ee, 3 * nee++);
        eeGeom.attributes.position.needsUpdate = true;
        eeGeom.setDrawRange(0, nee);
      }
      info.textContent = `live: ${F} frames, t = ${m.t.toFixed(3)} s (${L.fps} fps of result time)`;
      document.body.dataset.frames = F;
      if (seek !== null && S.t[F - 1] <= seek + 1e-9) setFrame(F - 1);
      if (follow || F === 1) setFrame(F - 1);
      draw();
    };
    source.addEventListener("end", (ev) => {
      source.close();
      L.running = false;
      const m = JSON.parse(ev.data);
      info.textContent = `${F} frames at ${L.fps} fps of result time; run ${m.outcome}`;
      if (follow) { follow = false; setPlaying(false); }
      document.body.dataset.live = "ended";
      draw();
    });
  }
})();
