/* Script of selfattention.interactive.stereo_explorer: pick a pixel of the
 * left image (click or tap, arrow keys, or the buttons), see its block of
 * rows enlarged on both images over its candidates, and its weight on each
 * candidate as bars, with the true match. Runs inside
 * (function() { var D, root, cap; ... })(); D is the figure's data, root
 * its box, cap its live caption. The bands of rows and the weights come as
 * rows of hex levels 0 ... 255.
 */
  var s = D.scale, side = D.scale, z = D.zoom;
  function unhex(text) {
    text = text.replace(/ /g, ""); var out = [];
    for (var i = 0; i < text.length; i += 2)
      out.push(parseInt(text.substr(i, 2), 16));
    return out;
  }
  var L = D.left.map(unhex), R = D.right.map(unhex);
  var P = D.weights.map(unhex), D1 = P[0].length;
  var q = D.query.slice();
  var pick = root.querySelector(".sa-pick");
  var key = root.querySelector(".sa-key");
  var zl = root.querySelector(".sa-zoom-left");
  var zr = root.querySelector(".sa-zoom-right");
  var bars = root.querySelector(".sa-map");
  // common.js: the helpers every figure shares
  [pick, key].forEach(function(cv) {   // keep the image, drop the still's marks
    cv.style.backgroundImage = cv.style.backgroundImage
      .replace(/^url\([^)]*\),\s*/, "");
  });
  function frame(cv, x, y, w, h) {
    var cx = cv.getContext("2d");
    [[4, "#000"], [2, "#fff"]].forEach(function(pen) {
      cx.lineWidth = pen[0]; cx.strokeStyle = pen[1];
      cx.strokeRect(x, y, w, h);
    });
  }
  function line(cv, x, y, h) {
    var cx = cv.getContext("2d");
    cx.fillStyle = "#000"; cx.fillRect(x - 2, y, 4, h);
    cx.fillStyle = "#fff"; cx.fillRect(x - 1, y, 2, h);
  }
  function strip(cv, band, a, n, c) {
    var cx = cv.getContext("2d");
    cx.fillStyle = "#fff"; cx.fillRect(0, 0, cv.width, cv.height);
    for (var i = 0; i < n; i++) {
      for (var j = 0; j < D1; j++) {
        var x = c - D1 + 1 + j;
        if (x < 0) continue;
        var g = band[a + i][x];
        cx.fillStyle = "rgb(" + g + "," + g + "," + g + ")";
        cx.fillRect(j * z, i * z, z, z);
      }
    }
  }
  function draw() {
    var r = D.rows[q[0]], c = D.cols[q[1]], y = D.imageRows[r];
    var a = D.first[r], n = 0;
    while (a + n < D.first.length && D.first[a + n] === a) n++;
    var w = P[q[0] * D.cols.length + q[1]].map(function(v) {
      return v / 255; });
    var t = D.truth[q[0]][q[1]];
    [pick, key].forEach(function(cv) {
      cv.getContext("2d").clearRect(0, 0, cv.width, cv.height); });
    var y0 = y * s + Math.floor(s / 2), x0 = Math.max(c - D1 + 1, 0) * s;
    frame(pick, c * s + Math.floor(s / 2) - 6, y0 - 6, 12, 12);
    frame(key, x0, y0 - 6, (c + 1) * s - 1 - x0, 12);
    strip(zl, L, a, n, c); strip(zr, R, a, n, c);
    frame(zl, (D1 - 1) * z, (r - a) * z, z, z);
    var bx = bars.getContext("2d"), top = bars.height - 8;
    bx.fillStyle = "#fff"; bx.fillRect(0, 0, bars.width, bars.height);
    for (var d = 0; d < D1 && c - d >= 0; d++) {
      var hgt = Math.round(Math.min(1, w[d] / D.hi) * top);
      bx.fillStyle = colour(w[d]);
      if (hgt) bx.fillRect((D1 - 1 - d) * z + 1, bars.height - hgt, z - 2,
                           hgt);
    }
    if (t !== null) {
      var tx = Math.round((D1 - 1 - t + 0.5) * z);
      line(bars, tx, 0, bars.height); line(zr, tx, (r - a) * z, z);
    }
    var order = w.map(function(v, k) { return [v, k]; })
      .sort(function(u, v) { return v[0] - u[0] || u[1] - v[1]; })
      .slice(0, D.top);
    cap.textContent = "left pixel: held-out row " + r + " (image row " + y +
      "), column " + c + "; most weight on " + order.map(function(o) {
        return "disparity " + o[1] + " (" + o[0].toFixed(2) + ")"; })
      .join(", ") + "; true disparity " + (t === null ? "unknown" :
        t.toFixed(1) + ", right column " + (c - t).toFixed(1));
  }
  function to(r, c) {
    q = [Math.max(0, Math.min(D.rows.length - 1, r)),
         Math.max(0, Math.min(D.cols.length - 1, c))];
    draw();
  }
  function nearest(list, v) {
    var best = 0;
    list.forEach(function(u, i) {
      if (Math.abs(u - v) < Math.abs(list[best] - v)) best = i; });
    return best;
  }
  pick.addEventListener("click", function(e) {
    var b = pick.getBoundingClientRect();
    var x = (e.clientX - b.left - pick.clientLeft) * pick.width /
      pick.clientWidth / s;
    var y = (e.clientY - b.top - pick.clientTop) * pick.height /
      pick.clientHeight / s;
    to(nearest(D.rows.map(function(r) { return D.imageRows[r]; }), y),
       nearest(D.cols, x));
  });
  pick.addEventListener("keydown", function(e) {
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    var k = e.key, r = q[0], c = q[1];
    if (k === "ArrowLeft") c -= 1; else if (k === "ArrowRight") c += 1;
    else if (k === "ArrowUp") r -= 1; else if (k === "ArrowDown") r += 1;
    else if (k === "Home") { r = 0; c = 0; }
    else if (k === "End") { r = D.rows.length; c = D.cols.length; }
    else return;
    e.preventDefault();
    to(r, c);
  });
  root.querySelectorAll("[data-move]").forEach(function(button) {
    button.addEventListener("click", function() {
      var m = +button.getAttribute("data-move");
      to(q[0] + [0, 0, -1, 1][m], q[1] + [-1, 1, 0, 0][m]);
    });
  });
  draw();
