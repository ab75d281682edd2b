/* Helpers every explorer shares: colours on the figure's scale, grey
 * images, weight maps, the query's outline, the patch under the pointer,
 * the arrow keys, the strongest weights. They read the figure's variables
 * D (its data), s (screen pixels per image pixel) and side (screen pixels
 * per patch); selfattention.interactive puts them into each figure's
 * script at the line that names common.js. Tested in tests/e2e/test_browser.py.
 */
  function colour(v) {
    var t = Math.min(1, Math.max(0, (v - D.lo) / (D.hi - D.lo)));
    var k = t * (D.lut.length - 1), i = Math.floor(k), f = k - i;
    var j = Math.min(i + 1, D.lut.length - 1);
    return "rgb(" + D.lut[i].map(function(c, m) {
      return Math.round(c + f * (D.lut[j][m] - c)); }).join(",") + ")";
  }
  function grey(cv, img) {
    var cx = cv.getContext("2d");
    for (var y = 0; y < img.length; y++) {
      for (var x = 0; x < img[0].length; x++) {
        var g = img[y][x];
        cx.fillStyle = "rgb(" + g + "," + g + "," + g + ")";
        cx.fillRect(x * s, y * s, s, s);
      }
    }
  }
  function map(cv, w) {
    var cx = cv.getContext("2d");
    for (var j = 0; j < w.length; j++) {
      cx.fillStyle = colour(w[j]);
      cx.fillRect((j % D.cols) * side, Math.floor(j / D.cols) * side,
                  side, side);
    }
  }
  function outline(cv, r, c) {
    var cx = cv.getContext("2d");
    [[4, "#000"], [2, "#fff"]].forEach(function(pen) {
      cx.lineWidth = pen[0]; cx.strokeStyle = pen[1];
      cx.strokeRect(c * side + 2, r * side + 2, side - 4, side - 4);
    });
  }
  function under(cv, e) {
    var b = cv.getBoundingClientRect();
    var x = (e.clientX - b.left - cv.clientLeft) * cv.width / cv.clientWidth;
    var y = (e.clientY - b.top - cv.clientTop) * cv.height / cv.clientHeight;
    return [Math.max(0, Math.min(D.rows - 1, Math.floor(y / side))),
            Math.max(0, Math.min(D.cols - 1, Math.floor(x / side)))];
  }
  function step(e, r, c) {
    if (e.altKey || e.ctrlKey || e.metaKey) return null;
    var k = e.key;
    if (k === "ArrowLeft") c -= 1; else if (k === "ArrowRight") c += 1;
    else if (k === "ArrowUp") r -= 1; else if (k === "ArrowDown") r += 1;
    else if (k === "Home") { r = 0; c = 0; }
    else if (k === "End") { r = D.rows - 1; c = D.cols - 1; }
    else return null;
    return [Math.max(0, Math.min(D.rows - 1, r)),
            Math.max(0, Math.min(D.cols - 1, c))];
  }
  function strongest(w) {
    return w.map(function(v, j) { return [v, j]; })
      .sort(function(a, b) { return b[0] - a[0] || a[1] - b[1]; })
      .slice(0, D.top);
  }
  function at(j) {
    return "(" + Math.floor(j / D.cols) + ", " + (j % D.cols) + ")";
  }
