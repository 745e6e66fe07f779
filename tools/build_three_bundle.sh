#!/usr/bin/env bash
# Rebuilds multibody_control/animation/vendor/three.min.js: the parts of three.js (npm package
# `three`, MIT) that the animation page uses, bundled and minified by esbuild into one
# self-contained script defining the global THREE (no network access at view time).
# Needs node/npm; run from the repository root: bash tools/build_three_bundle.sh
set -euo pipefail
THREE_VERSION=0.187.0
ESBUILD_VERSION=0.28.2
out="$PWD/multibody_control/animation/vendor"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
npm init -y >/dev/null
npm install -q --no-audit --no-fund "three@$THREE_VERSION" "esbuild@$ESBUILD_VERSION" >/dev/null
cat > entry.js <<'JS'
export {
  Scene, PerspectiveCamera, WebGLRenderer, Color, Vector3, Quaternion, Matrix4,
  BoxGeometry, CylinderGeometry, SphereGeometry, CapsuleGeometry, BufferGeometry,
  Float32BufferAttribute, MeshLambertMaterial, LineBasicMaterial, LineDashedMaterial,
  Mesh, Line, LineSegments, AmbientLight, DirectionalLight, GridHelper, AxesHelper, Group,
  REVISION
} from 'three';
export { OrbitControls } from 'three/addons/controls/OrbitControls.js';
JS
npx esbuild entry.js --bundle --minify --format=iife --global-name=THREE \
  --legal-comments=inline --outfile="$out/three.min.js"
cp node_modules/three/LICENSE "$out/three.LICENSE"
echo "three $THREE_VERSION -> $out/three.min.js ($(wc -c < "$out/three.min.js") bytes)"
