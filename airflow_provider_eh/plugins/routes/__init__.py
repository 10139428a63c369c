"""The view's routes, a module an API: each holds one ``router`` made by :func:`~airflow_provider_eh.plugins.web.new_router`,
whose routes take who asks, what they may read and the request's source from the web layer's dependencies
(:mod:`~airflow_provider_eh.plugins.web`) and answer through its :func:`~airflow_provider_eh.plugins.web.answer`."""
