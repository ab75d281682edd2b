/* Script of selfattention.interactive.patch_explorer: pick a patch, see
 * its attention map. Runs inside (function() { var D, root, cap; ... })();
 * D is the figure's data, root its box, cap its live caption.
 */
  var head = 0, q = D.query, s = D.scale, side = D.patch * D.scale;
  var pick = root.querySelector(".sa-pick");
  var shown = root.querySelector(".sa-map");
  var btns = root.querySelectorAll("button[data-head]");
  // common.js: the helpers every figure shares
  function draw() {
    var w = D.weights[head][q], r = Math.floor(q / D.cols), c = q % D.cols;
    grey(pick, D.pixels); outline(pick, r, c);
    map(shown, w); outline(shown, r, c);
    btns.forEach(function(b, k) {
      b.setAttribute("aria-pressed", k === head ? "true" : "false"); });
    cap.textContent = "patch " + at(q) + (D.weights.length > 1 ?
      ", head " + (head + 1) + " of " + D.weights.length : "") +
      (D.names ? " (" + D.names[head] + ")" : "") +
      ": most weight on " + strongest(w).map(function(o) {
        return at(o[1]) + " " + o[0].toFixed(3); }).join(", ");
  }
  [pick, shown].forEach(function(cv) {
    cv.addEventListener("click", function(e) {
      var rc = under(cv, e); q = rc[0] * D.cols + rc[1]; draw(); });
  });
  pick.addEventListener("keydown", function(e) {
    var rc = step(e, Math.floor(q / D.cols), q % D.cols);
    if (rc === null) return;
    e.preventDefault(); q = rc[0] * D.cols + rc[1]; draw();
  });
  btns.forEach(function(b, k) {
    b.addEventListener("click", function() { head = k; draw(); }); });
  draw();
