// Building the pages' elements: shared by the view (view.js) and the task-instance tab (tab.js).
(function (root) {
  "use strict";

  // el("td", {className: "num", text: "12"}, [child, "text", ...]): attributes, then children (null ones skipped)
  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k];
      else if (k === "className") node.className = attrs[k];
      else node.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { if (c) node.appendChild(typeof c === "string" ? document.createTextNode(c) : c); });
    return node;
  }

  root.EventHubsDom = {el: el};
})(window);
