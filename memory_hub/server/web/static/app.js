// Progressive: every page works without this file. It only refreshes search results as you type
// (the server renders them: /?fragment=1&...) and focuses the search box on "/".
(function () {
  "use strict";
  var form = document.getElementById("search-form");
  var results = document.getElementById("results");
  if (form && results && window.fetch && window.URLSearchParams) {
    var timer = null, seq = 0;
    form.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(function () {
        var params = new URLSearchParams(new FormData(form));
        var mine = ++seq;
        history.replaceState(null, "", "/?" + params.toString());
        params.set("fragment", "1");
        fetch("/?" + params.toString(), {headers: {"Accept": "text/html"}, credentials: "same-origin"})
          .then(function (r) { return r.text(); })
          .then(function (html) { if (mine === seq) { results.innerHTML = html; } })
          .catch(function () { /* the submit button still works */ });
      }, 250);
    });
  }
  document.addEventListener("keydown", function (e) {
    var t = e.target && e.target.tagName;
    if (e.key === "/" && t !== "INPUT" && t !== "TEXTAREA" && t !== "SELECT") {
      var box = document.getElementById("q") || document.querySelector("form.quick input");
      if (box) { e.preventDefault(); box.focus(); }
    }
  });
})();
