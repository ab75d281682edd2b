/* Script of selfattention.interactive.cost_calculator: the menus
 * recompute tokens, score entries and bytes with the formulas of
 * selfattention.cost. Runs inside (function() { var D, root, cap; ... })().
 */
  function menu(name) {
    return root.querySelector('[data-in="' + name + '"]'); }
  function get(name) { return +menu(name).value; }
  function commas(x) {
    return String(x).replace(/\B(?=(\d{3})+(?!\d))/g, ","); }
  function human(b) {
    var units = [["TB", 1e12], ["GB", 1e9], ["MB", 1e6], ["kB", 1e3]];
    for (var i = 0; i < units.length; i++) {
      if (b >= units[i][1]) {
        return (b / units[i][1]).toFixed(2) + " " + units[i][0]; }
    }
    return b + " B";
  }
  function patches() {
    var side = get("side"), sel = menu("patch");
    var old = +sel.value, best = 1, html = "";
    for (var p = 1; p <= side; p++) {
      if (side % p === 0) {
        if (Math.abs(p - old) < Math.abs(best - old)) { best = p; }
        html += '<option value="' + p + '">' + p + " × " + p + "</option>";
      }
    }
    sel.innerHTML = html; sel.value = best;
  }
  function update() {
    var side = get("side"), p = get("patch"), h = get("heads");
    var n = (side / p) * (side / p), e = n * n;
    var type = menu("bytes").selectedOptions[0].textContent;
    var vals = [commas(n), commas(e), human(e * h * get("bytes")),
                commas((e / D.vit).toFixed(2))];
    root.querySelectorAll("[data-row]").forEach(function(td) {
      td.textContent = vals[+td.getAttribute("data-row")]; });
    root.querySelector("[data-heads]").textContent =
      "memory for " + h + " head(s), one layer";
    cap.textContent = side + " × " + side + " pixels in " + p + " × " + p +
      " patches: " + vals[0] + " tokens, " + vals[1] +
      " score entries per head, " + vals[2] + " for " + h + " head(s) in " +
      type;
  }
  menu("side").addEventListener("change", function() {
    patches(); update(); });
  ["patch", "heads", "bytes"].forEach(function(name) {
    menu(name).addEventListener("change", update); });
