/* Script of selfattention.interactive.stereo_explorer: click a pixel of the
 * left image, see its weights over the right pixels of its row and the true
 * match. Runs inside (function() { var D, root, cap; ... })(); D is the
 * figure's data, root its box, cap its live caption. Images and weights
 * come as rows of hex levels 0 ... 255.
 */
  var s = D.scale, side = D.scale, D1 = 0;
  function unhex(text) {
    text = text.replace(/ /g, ""); var out = [];
    for (var i = 0; i < text.length; i += 2)
      out.push(parseInt(text.substr(i, 2), 16));
    return out;
  }
  var L = D.left.map(unhex), R = D.right.map(unhex);
  var P = D.weights.map(unhex); D1 = P[0].length;
  var q = D.query.slice();
  var pick = root.querySelector(".sa-pick");
  var key = root.querySelector(".sa-key");
  var strip = root.querySelector(".sa-map");
  // common.js: the helpers every figure shares
  function mark(cx, x, y, size) {
    [[4, "#000"], [2, "#fff"]].forEach(function(pen) {
      cx.lineWidth = pen[0]; cx.strokeStyle = pen[1];
      cx.strokeRect(x - size, y - size, 2 * size, 2 * size);
    });
  }
  function draw() {
    var r = D.rows[q[0]], c = D.cols[q[1]];
    var w = P[q[0] * D.cols.length + q[1]].map(function(v) {
      return v / 255; });
    var t = D.truth[q[0]][q[1]];
    grey(pick, L); grey(key, R);
    mark(pick.getContext("2d"), (c + 0.5) * s, (r + 0.5) * s, 4);
    var kx = key.getContext("2d");
    kx.lineWidth = 1; kx.strokeStyle = "#fff";
    kx.beginPath(); kx.moveTo(0, (r + 0.5) * s);
    kx.lineTo(D.W * s, (r + 0.5) * s); kx.stroke();
    if (t !== null) mark(kx, (c - t + 0.5) * s, (r + 0.5) * s, 4);
    var sx = strip.getContext("2d");
    sx.fillStyle = "#fff"; sx.fillRect(0, 0, strip.width, strip.height);
    for (var d = 0; d < D1; d++) {
      if (c - d < 0) break;
      sx.fillStyle = colour(w[d]);
      sx.fillRect((c - d) * s, 0, s, 18);
    }
    if (t !== null) {
      sx.fillStyle = "#000"; sx.fillRect((c - t + 0.5) * s - 2, 14, 4, 10);
      sx.fillStyle = "#fff"; sx.fillRect((c - t + 0.5) * s - 1, 16, 2, 8);
    }
    var order = w.map(function(v, d) { return [v, d]; })
      .sort(function(a, b) { return b[0] - a[0] || a[1] - b[1]; })
      .slice(0, D.top);
    cap.textContent = "left pixel: row " + D.imageRows[q[0]] + ", column " +
      c + "; most weight on " + order.map(function(o) {
        return "disparity " + o[1] + " (" + o[0].toFixed(2) + ")"; })
      .join(", ") + "; true disparity " + (t === null ? "unknown" :
        t.toFixed(1) + ", right column " + (c - t).toFixed(1));
  }
  pick.addEventListener("click", function(e) {
    var b = pick.getBoundingClientRect();
    var x = (e.clientX - b.left - pick.clientLeft) * pick.width /
      pick.clientWidth / s;
    var y = (e.clientY - b.top - pick.clientTop) * pick.height /
      pick.clientHeight / s;
    function nearest(list, v) {
      var best = 0;
      list.forEach(function(u, i) {
        if (Math.abs(u - v) < Math.abs(list[best] - v)) best = i; });
      return best;
    }
    q = [nearest(D.rows, y), nearest(D.cols, x)]; draw();
  });
  pick.addEventListener("keydown", function(e) {
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    var k = e.key, r = q[0], c = q[1];
    if (k === "ArrowLeft") c -= 1; else if (k === "ArrowRight") c += 1;
    else if (k === "ArrowUp") r -= 1; else if (k === "ArrowDown") r += 1;
    else if (k === "Home") { r = 0; c = 0; }
    else if (k === "End") { r = D.rows.length - 1; c = D.cols.length - 1; }
    else return;
    e.preventDefault();
    q = [Math.max(0, Math.min(D.rows.length - 1, r)),
         Math.max(0, Math.min(D.cols.length - 1, c))];
    draw();
  });
  draw();
