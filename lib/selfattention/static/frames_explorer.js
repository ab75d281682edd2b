/* Script of selfattention.interactive.frames_explorer: pick a patch of
 * one frame, see where it attends in every key frame. Runs inside
 * (function() { var D, root, cap; ... })(), as patch_explorer.js.
 */
  var s = D.scale, side = D.patch * D.scale, n = D.rows * D.cols;
  var q = D.query;
  var picks = root.querySelectorAll(".sa-pick");
  var keys = root.querySelectorAll(".sa-key");
  var maps = root.querySelectorAll(".sa-map");
  // common.js: the helpers every figure shares
  function where(j) {
    return [Math.floor(j / n), Math.floor((j % n) / D.cols), j % D.cols];
  }
  function draw() {
    var w = D.weights[q], a = where(q);
    picks.forEach(function(cv, t) { grey(cv, D.q[t]); });
    outline(picks[a[0]], a[1], a[2]);
    keys.forEach(function(cv, t) { grey(cv, D.k[t]); });
    maps.forEach(function(cv, t) { map(cv, w.slice(t * n, (t + 1) * n)); });
    if (!D.cross) outline(maps[a[0]], a[1], a[2]);
    var head = "query: " + D.labels[a[0]] + ", patch (" + a[1] + ", " +
      a[2] + "); ";
    if (D.perFrame) {
      cap.textContent = "patch (" + a[1] + ", " + a[2] + ") of each panel, " +
        "picked in " + D.labels[a[0]] + "; where it looks most in each map: " +
        D.keyLabels.map(function(label, t) {
          var o = strongest(w.slice(t * n, (t + 1) * n))[0];
          return label + " " + at(o[1]) + " " + o[0].toFixed(3); }).join(", ");
      return;
    }
    var order = strongest(w), b = where(order[0][1]);
    cap.textContent = head + "most weight on " + order.map(function(o) {
        return D.keyLabels[Math.floor(o[1] / n)] + " " + at(o[1] % n) +
          " " + o[0].toFixed(3); }).join(", ") +
      "; displacement to the strongest (rows, columns): (" +
      (b[1] - a[1]) + ", " + (b[2] - a[2]) + ")";
  }
  picks.forEach(function(cv, t) {
    cv.addEventListener("click", function(e) {
      var rc = under(cv, e); q = t * n + rc[0] * D.cols + rc[1]; draw(); });
    cv.addEventListener("keydown", function(e) {
      var a = where(q), rc = step(e, a[1], a[2]);
      if (rc === null && (e.key === "Enter" || e.key === " ")) rc = a.slice(1);
      if (rc === null) return;
      e.preventDefault(); q = t * n + rc[0] * D.cols + rc[1]; draw();
    });
  });
  if (!D.cross) maps.forEach(function(cv, t) {
    cv.addEventListener("click", function(e) {
      var rc = under(cv, e); q = t * n + rc[0] * D.cols + rc[1]; draw(); });
  });
  draw();
